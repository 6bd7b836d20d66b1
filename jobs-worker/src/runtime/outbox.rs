//! The outbox relay as a plugin of the worker (feature `postgres`): checked before the first
//! job, run beside the jobs, stopped with them.

use redjob::async_trait;
use redjob::outbox::{OutboxError, Relay};
use tokio_util::sync::CancellationToken;

use crate::plugin::Plugin;

#[async_trait]
impl Plugin for Relay {
    fn name(&self) -> String {
        "outbox relay".into()
    }

    /// A missing or outdated table refuses the start; a PostgreSQL that cannot be reached
    /// now is left to the relay's passes, which retry.
    async fn check(&self) -> Result<(), String> {
        match Relay::check(self).await {
            Ok(()) => Ok(()),
            Err(err @ OutboxError::TableMissing { .. }) => Err(err.to_string()),
            Err(err) => {
                tracing::warn!(error = %err, "cannot check the outbox table; relaying anyway");
                Ok(())
            }
        }
    }

    /// Relays until stopped, after its pass in progress.
    async fn run(self: Box<Self>, stop: CancellationToken) {
        (*self).run_until(stop.cancelled_owned()).await;
    }
}
