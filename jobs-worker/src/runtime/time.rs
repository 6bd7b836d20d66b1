//! Sleeps that wait forever when there is nothing to wait for, for `select!` arms that may
//! have no deadline; and the Unix time the attempt rules compare `retryUntil` with.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, by this host's clock (as Laravel's worker compares
/// `retryUntil` with its own). Read straight from the system clock: this runs for every job.
pub(crate) fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64)
}

/// Sleeps for `duration`, or forever when there is none.
pub(crate) async fn sleep_for(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`, or forever when there is none.
pub(crate) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
