//! Times as the scripts take them: seconds with a millisecond fraction, and a delayed job's
//! due argument.

use std::time::Duration;

use crate::payload::delay::Delay;

/// Seconds with a millisecond fraction, as the scripts take them.
pub(crate) fn seconds_arg(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// A delayed job's due argument for `later.lua`: a delay from the server's now, or `@` and
/// the unix time of a job dispatched to run at a point in time.
pub(crate) fn due_arg(delay: Option<Delay>) -> String {
    match delay {
        Some(Delay::At(at)) => format!("@{}.{:03}", at.timestamp(), at.timestamp_subsec_millis()),
        Some(Delay::After(delay)) => seconds_arg(delay),
        None => seconds_arg(Duration::ZERO),
    }
}

/// The delay of a due argument of `later.lua` ([`due_arg`]); `None` for `""`, a ready job.
pub(crate) fn delay_from_due(due: &str) -> Option<Delay> {
    if due.is_empty() {
        return None;
    }
    let seconds = |text: &str| {
        text.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
    };
    match due.strip_prefix('@') {
        Some(at) => {
            let millis = (seconds(at)? * 1000.0).round() as i64;
            Some(Delay::At(chrono::DateTime::from_timestamp_millis(millis)?))
        }
        None => Some(Delay::After(Duration::from_secs_f64(seconds(due)?))),
    }
}
