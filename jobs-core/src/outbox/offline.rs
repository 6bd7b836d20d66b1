//! The outbox's offline extension point: on a handle that talks to no Redis, a dispatch made
//! in a transaction goes to an [`OfflineOutbox`] its extensions hold (the fake queue of
//! [`crate::testing`] records it once the transaction commits), never into an outbox table
//! that a relay could move into a real queue.

use async_trait::async_trait;
use sqlx::PgConnection;
use std::sync::Arc;

use crate::queue::Envelope;

use super::OutboxError;

/// Where an offline handle's dispatches in a transaction go.
#[async_trait]
pub(crate) trait OfflineOutbox: Send + Sync + 'static {
    /// Takes `envelopes`, dispatched in the transaction (or on the connection) `conn`: they
    /// count as pushed once it commits, and not at all if it rolls back.
    async fn write(
        &self,
        conn: &mut PgConnection,
        envelopes: Vec<Envelope>,
    ) -> Result<(), OutboxError>;
}

/// The [`OfflineOutbox`] of an offline handle, as its extensions hold it.
pub(crate) struct OfflineOutboxes(pub(crate) Arc<dyn OfflineOutbox>);
