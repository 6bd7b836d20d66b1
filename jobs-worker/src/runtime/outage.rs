//! Retrying a Redis change through short outages.

use std::future::Future;
use std::time::{Duration, Instant};
use tracing::warn;

/// A pause that doubles after each use, up to a cap, until reset: the wait between attempts
/// to reach Redis.
#[derive(Debug, Clone)]
pub(crate) struct Pause {
    first: Duration,
    max: Duration,
    current: Duration,
}

impl Pause {
    /// A pause of `first`, doubling up to `max`.
    pub(crate) fn new(first: Duration, max: Duration) -> Self {
        Pause {
            first,
            max,
            current: first,
        }
    }

    /// The pause to wait now; the next one is twice as long, up to the cap.
    pub(crate) fn take(&mut self) -> Duration {
        let now = self.current;
        self.current = (self.current * 2).min(self.max);
        now
    }

    /// The pause that [`Pause::take`] would return, without using it.
    pub(crate) fn peek(&self) -> Duration {
        self.current
    }

    /// Back to the first pause, after a success.
    pub(crate) fn reset(&mut self) {
        self.current = self.first;
    }
}

/// The longest pause between a worker's attempts to take jobs while Redis cannot be reached:
/// a worker takes jobs again within this long of Redis coming back (a failover's new primary
/// elected, a restart done), at the cost of one attempt, and one warning, per pause.
pub(crate) const TAKING_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Runs `op` until it succeeds or `within` has passed, pausing 50 ms, then twice as long each
/// time, up to 2 s. Returns `None` when it gave up; `what` names the change in the log.
pub(crate) async fn with_retries<T, F, Fut>(within: Duration, what: &str, mut op: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = redjob::Result<T>>,
{
    let deadline = Instant::now() + within;
    let mut pause = Pause::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        match op().await {
            Ok(value) => return Some(value),
            Err(err) if Instant::now() + pause.peek() < deadline => {
                warn!(error = %err, "cannot {what} yet; retrying");
                tokio::time::sleep(pause.take()).await;
            }
            Err(err) => {
                warn!(error = %err, "giving up: cannot {what}; the job comes back after retry_after");
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_doubles_up_to_its_cap_and_resets() {
        let ms = Duration::from_millis;
        let mut pause = Pause::new(ms(100), ms(350));
        let taken: Vec<_> = (0..4).map(|_| pause.take()).collect();
        assert_eq!(taken, [ms(100), ms(200), ms(350), ms(350)]);
        pause.reset();
        assert_eq!(pause.peek(), ms(100));
    }
}
