//! An outbox relay run beside a worker's jobs (feature `postgres`): started with the jobs,
//! stopped when they stop.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The relay a worker may be given.
#[cfg(feature = "postgres")]
pub(crate) type Relay = redjob::outbox::Relay;
/// Without the feature a worker is given none.
#[cfg(not(feature = "postgres"))]
pub(crate) type Relay = std::convert::Infallible;

/// The relay a worker was given, before it starts.
pub(crate) type Given = Option<Relay>;

/// Checks the outbox a worker was given, before it starts: a missing or outdated table
/// refuses the start (the reason is the error); a PostgreSQL that cannot be reached now is
/// left to the relay's passes, which retry.
pub(crate) async fn check(given: Option<&Relay>) -> Result<(), String> {
    #[cfg(feature = "postgres")]
    if let Some(relay) = given {
        match relay.check().await {
            Ok(()) => {}
            Err(err @ redjob::outbox::OutboxError::TableMissing { .. }) => {
                return Err(err.to_string())
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot check the outbox table; relaying anyway")
            }
        }
    }
    #[cfg(not(feature = "postgres"))]
    if let Some(never) = given {
        match *never {}
    }
    Ok(())
}

/// A relay running beside the jobs.
pub(crate) struct Running {
    task: Option<JoinHandle<()>>,
    stop: CancellationToken,
}

impl Running {
    /// Starts `given`, if any, until [`Running::stop`].
    pub(crate) fn start(given: Given) -> Running {
        let stop = CancellationToken::new();
        #[cfg(feature = "postgres")]
        let task = given.map(|relay| tokio::spawn(relay.run_until(stop.clone().cancelled_owned())));
        #[cfg(not(feature = "postgres"))]
        let task = given.map(|never| match never {});
        Running { task, stop }
    }

    /// Stops the relay after its pass in progress.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}
