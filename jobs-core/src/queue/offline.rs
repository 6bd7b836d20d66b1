//! The offline extension point: a handle that talks to no Redis hands its pushes and freed
//! holds to an [`Offline`] sink instead. The fake queue of [`crate::testing`] is one; the
//! queue layer knows nothing of it. Capabilities above the queue that push on their own (chains,
//! batches, schedule ticks) find their offline counterparts in the handle's
//! [`Extensions`](super::Extensions).

use async_trait::async_trait;

use crate::payload::unique::Dispatched;
use crate::queue::handle::RedisQueue;
use crate::queue::hold::Hold;
use crate::queue::push::Envelope;

/// Where an offline handle's pushes go.
#[async_trait]
pub(crate) trait Offline: Send + Sync + 'static {
    /// Takes `envelopes`, pushed through `queue`, as a real queue would: each is queued, or
    /// refused as a duplicate of a unique job.
    async fn push(&self, queue: &RedisQueue, envelopes: &[Envelope]) -> Vec<Dispatched>;

    /// Frees holds, each only if its owner holds it.
    fn free(&self, holds: &[Hold]);
}

/// The [`Offline`] sink of an offline handle, as its extensions hold it.
pub(crate) struct OfflineSink(pub(crate) std::sync::Arc<dyn Offline>);

impl RedisQueue {
    /// The part of type `T` that an offline handle's extensions hold (its [`OfflineSink`], a
    /// capability's offline counterpart, the fake's recorder); `None` on a handle that talks to
    /// a Redis, which looks nothing up.
    pub(crate) fn offline_part<T: Send + Sync + 'static>(&self) -> Option<std::sync::Arc<T>> {
        match self.is_offline() {
            true => self.extensions().get::<T>(),
            false => None,
        }
    }

    /// Hands `envelopes` to this handle's offline sink, when it talks to no Redis; `None`
    /// otherwise, for the caller to push them.
    pub(crate) async fn push_offline(&self, envelopes: &[Envelope]) -> Option<Vec<Dispatched>> {
        let sink = self.offline_part::<OfflineSink>()?;
        Some(sink.0.push(self, envelopes).await)
    }

    /// Hands `holds` to this handle's offline sink to free, when it talks to no Redis; `false`
    /// otherwise, for the caller to free them.
    pub(crate) fn free_offline(&self, holds: &[Hold]) -> bool {
        match self.offline_part::<OfflineSink>() {
            Some(sink) => {
                sink.0.free(holds);
                true
            }
            None => false,
        }
    }
}
