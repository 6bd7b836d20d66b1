//! The checks a worker makes before it takes a job: its state, and whether Redis can serve it.
//! A setting to fix ends the start at once; a Redis that is not reachable yet is waited for.

use redjob::{DuplicateState, RedisQueue, State};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::runtime::outage::Pause;

/// Application state as a worker or a synchronous run is given it, value by value: the first
/// type given twice is kept, to refuse the start with.
#[derive(Default)]
pub(crate) struct GivenState {
    state: State,
    duplicate: Option<DuplicateState>,
}

impl GivenState {
    /// Adds `value`, the one value of its type.
    pub(crate) fn give<T: Send + Sync + 'static>(&mut self, value: T) {
        if let Err(duplicate) = self.state.insert(value) {
            self.duplicate.get_or_insert(duplicate);
        }
    }

    /// The state, unless a type was given twice.
    pub(crate) fn checked(&self) -> Result<&State, DuplicateState> {
        match &self.duplicate {
            Some(duplicate) => Err(duplicate.clone()),
            None => Ok(&self.state),
        }
    }
}

impl From<State> for GivenState {
    fn from(state: State) -> Self {
        GivenState {
            state,
            duplicate: None,
        }
    }
}

/// Waits until Redis answers and can serve the worker ([`RedisQueue::check`]). Returns an
/// error at once for a setting to fix (refused credentials, a command the ACL denies, TLS
/// that fails, too old a server); retries a Redis that is unreachable, saying why, until it
/// answers (`true`) or `stop` is cancelled (`false`).
pub(crate) async fn wait_for_redis(
    queue: &RedisQueue,
    stop: &CancellationToken,
) -> redjob::Result<bool> {
    let mut pause = Pause::new(Duration::from_millis(200), Duration::from_secs(5));
    let mut failed_before = false;
    loop {
        match queue.check().await {
            Ok(()) => {
                if failed_before {
                    info!("Redis answers; starting");
                }
                return Ok(true);
            }
            Err(err) if err.is_configuration() => return Err(err),
            Err(err) => {
                let wait = pause.take();
                warn!(
                    error = %err,
                    retry_in_s = wait.as_secs_f64(),
                    "cannot reach Redis to start; retrying"
                );
                failed_before = true;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.cancelled() => return Ok(false),
                }
            }
        }
    }
}
