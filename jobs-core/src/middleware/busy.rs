//! What a built-in middleware does with a job it cannot run yet, and the builder methods that
//! choose it.

use std::time::Duration;

use crate::job::context::JobContext;

/// What a built-in middleware does with a job it cannot run yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum WhenBusy {
    /// Try again later without counting the attempt (the default).
    #[default]
    Requeue,
    /// Try again later, counting the attempt, as Laravel's middleware does.
    Release,
    /// Drop the job, settled as done (Laravel's `dontRelease()`).
    Skip,
}

impl WhenBusy {
    /// Asks `ctx` for this verdict, to take effect after `delay`.
    pub(crate) fn apply(self, ctx: &JobContext, delay: Duration) {
        match self {
            WhenBusy::Requeue => ctx.requeue(delay),
            WhenBusy::Release => ctx.release(delay),
            WhenBusy::Skip => ctx.skip(),
        }
    }
}

/// Writes, inside a middleware's `impl` block, the builder methods it lists, each with the
/// documentation given for it, so that every middleware describes the choice in its own terms
/// while the methods stay inherent (no trait to import).
///
/// `count_attempt` and `dont_release` set the type's `when_busy: WhenBusy` field;
/// `release_after` sets its `release_after: Duration` field.
///
/// ```text
/// impl Funnel {
///     when_busy_builders! {
///         /// How long a job that found no free slot waits before it tries again.
///         fn release_after;
///         /// Counts the wait as an attempt.
///         fn count_attempt;
///     }
/// }
/// ```
macro_rules! when_busy_builders {
    () => {};
    ($(#[$doc:meta])* fn release_after; $($rest:tt)*) => {
        $(#[$doc])*
        pub fn release_after(mut self, delay: impl Into<$crate::payload::delay::Delay>) -> Self {
            self.release_after = delay.into().duration_from_now();
            self
        }
        $crate::middleware::busy::when_busy_builders! { $($rest)* }
    };
    ($(#[$doc:meta])* fn count_attempt; $($rest:tt)*) => {
        $(#[$doc])*
        pub fn count_attempt(mut self) -> Self {
            self.when_busy = $crate::middleware::busy::WhenBusy::Release;
            self
        }
        $crate::middleware::busy::when_busy_builders! { $($rest)* }
    };
    ($(#[$doc:meta])* fn dont_release; $($rest:tt)*) => {
        $(#[$doc])*
        pub fn dont_release(mut self) -> Self {
            self.when_busy = $crate::middleware::busy::WhenBusy::Skip;
            self
        }
        $crate::middleware::busy::when_busy_builders! { $($rest)* }
    };
}
pub(crate) use when_busy_builders;
