//! Sleeps that wait forever when there is nothing to wait for, for `select!` arms that may
//! have no deadline.

use std::time::{Duration, Instant};

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
