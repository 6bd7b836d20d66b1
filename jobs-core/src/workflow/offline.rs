//! The workflow's offline extension point: on a handle that talks to no Redis, chains and
//! batches go to an [`OfflineWorkflow`] its extensions hold (the fake queue of
//! [`crate::testing`] records them), as pushes go to the queue layer's offline sink.

use async_trait::async_trait;
use std::sync::Arc;
use uuid::Uuid;

use crate::queue::RedisQueue;
use crate::workflow::plan::{ChainLinks, Opening, Prepared};

/// Where an offline handle's chains and batches go.
#[async_trait]
pub(crate) trait OfflineWorkflow: Send + Sync + 'static {
    /// Takes a chain dispatched through `queue`: its first link pushed, the others kept.
    async fn chain(&self, queue: &RedisQueue, links: ChainLinks);

    /// Takes the batch `id` dispatched through `queue`.
    async fn batch(&self, queue: &RedisQueue, id: Uuid, opening: &Opening, members: &[Prepared]);

    /// Takes jobs added to the batch `id` from outside it; `false` for a batch it never took.
    async fn add_to_batch(&self, queue: &RedisQueue, id: Uuid, members: &[Prepared]) -> bool;
}

/// The [`OfflineWorkflow`] of an offline handle, as its extensions hold it.
pub(crate) struct OfflineWorkflows(pub(crate) Arc<dyn OfflineWorkflow>);
