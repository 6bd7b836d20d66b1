//! Retrying a Redis change through short outages.

use std::future::Future;
use std::time::{Duration, Instant};
use tracing::warn;

/// Runs `op` until it succeeds or `within` has passed, pausing 50 ms, then twice as long each
/// time, up to 2 s. Returns `None` when it gave up; `what` names the change in the log.
pub async fn with_retries<T, F, Fut>(within: Duration, what: &str, mut op: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = jobs_core::Result<T>>,
{
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_millis(50);
    loop {
        match op().await {
            Ok(value) => return Some(value),
            Err(err) if Instant::now() + pause < deadline => {
                warn!(error = %err, "cannot {what} yet; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(err) => {
                warn!(error = %err, "giving up: cannot {what}; the job comes back after retry_after");
                return None;
            }
        }
    }
}
