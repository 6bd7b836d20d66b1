//! How long until a dispatched or released job may run.

use chrono::{DateTime, Utc};
use std::time::Duration;

/// A delay: whole seconds, a `Duration`, or a point in time.
///
/// ```
/// use redjob::Delay;
/// use std::time::Duration;
/// assert_eq!(Delay::from(30).duration_from_now(), Duration::from_secs(30));
/// assert_eq!(Delay::from(Duration::from_millis(1500)).duration_from_now(), Duration::from_millis(1500));
/// let past = chrono::Utc::now() - chrono::Duration::seconds(5);
/// assert_eq!(Delay::from(past).duration_from_now(), Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// Run after this long.
    After(Duration),
    /// Run at this time (by this host's clock); a time in the past means now.
    At(DateTime<Utc>),
}

impl Delay {
    /// The delay as a duration from now.
    pub fn duration_from_now(&self) -> Duration {
        match self {
            Delay::After(d) => *d,
            Delay::At(at) => (*at - Utc::now()).to_std().unwrap_or(Duration::ZERO),
        }
    }
}

impl From<Duration> for Delay {
    fn from(d: Duration) -> Self {
        Delay::After(d)
    }
}

impl From<DateTime<Utc>> for Delay {
    fn from(at: DateTime<Utc>) -> Self {
        Delay::At(at)
    }
}

macro_rules! delay_from_seconds {
    ($($t:ty),*) => {$(
        impl From<$t> for Delay {
            /// Whole seconds; a negative number means no delay.
            #[allow(unused_comparisons)]
            fn from(seconds: $t) -> Self {
                Delay::After(Duration::from_secs(if seconds < 0 { 0 } else { seconds as u64 }))
            }
        }
    )*};
}
delay_from_seconds!(i32, u32, i64, u64, usize);
