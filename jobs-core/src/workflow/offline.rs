//! The workflow's offline extension point: on a handle that talks to no Redis, chains and
//! batches go to an [`OfflineWorkflow`] its extensions hold (the fake queue of
//! [`crate::testing`] records them), as pushes go to the queue layer's offline sink.

use futures_util::future::BoxFuture;
use std::sync::Arc;
use uuid::Uuid;

use crate::queue::RedisQueue;
use crate::workflow::plan::{ChainLinks, Opening, Prepared};

/// Where an offline handle's chains and batches go.
pub(crate) trait OfflineWorkflow: Send + Sync + 'static {
    /// Takes a chain dispatched through `queue`: its first link pushed, the others kept.
    fn chain<'a>(&'a self, queue: &'a RedisQueue, links: ChainLinks) -> BoxFuture<'a, ()>;

    /// Takes the batch `id` dispatched through `queue`.
    fn batch<'a>(
        &'a self,
        queue: &'a RedisQueue,
        id: Uuid,
        opening: &'a Opening,
        members: &'a [Prepared],
    ) -> BoxFuture<'a, ()>;

    /// Takes jobs added to the batch `id` from outside it; `false` for a batch it never took.
    fn add_to_batch<'a>(
        &'a self,
        queue: &'a RedisQueue,
        id: Uuid,
        members: &'a [Prepared],
    ) -> BoxFuture<'a, bool>;
}

/// The [`OfflineWorkflow`] of an offline handle, as its extensions hold it.
pub(crate) struct OfflineWorkflows(pub(crate) Arc<dyn OfflineWorkflow>);
