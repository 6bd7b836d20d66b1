//! Where a batch is counted: what a settling script needs to count a job of a batch (its keys
//! and its callbacks' routes), the step that starts a batch its chain reached, and finished
//! jobs of one batch acknowledged and counted together (`complete_batch.lua`).

use std::time::Duration;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::keys::{KeyLayout, QueueKeys};
use crate::queue::{scripts, RedisQueue};
use crate::workflow::link::Link;
use crate::workflow::record::BatchKeys;

/// What a settling script needs to count a job in its batch: the batch's keys, its callbacks'
/// routes, and how long to keep it once finished.
#[derive(Debug)]
pub(crate) struct BatchStep {
    pub(crate) keys: BatchKeys,
    pub(crate) routes: Vec<String>,
    pub(crate) dues: Vec<String>,
    pub(crate) keep: Duration,
}

impl BatchStep {
    /// The keys of the step, in the order `batch_from` in `lib/batch.lua` reads them.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys
            .all()
            .into_iter()
            .chain(self.routes.iter().map(String::as_str))
    }

    /// The arguments `batch_from` reads.
    pub(crate) fn args(&self) -> impl Iterator<Item = String> + '_ {
        self.dues
            .iter()
            .cloned()
            .chain(std::iter::once(self.keep.as_secs().max(1).to_string()))
    }
}

impl RedisQueue {
    /// The step that counts a job of the batch `id`.
    pub(crate) async fn batch_step(&self, id: Uuid) -> Result<BatchStep> {
        let keys = self.batch_keys(id);
        let callbacks = self.batch_callbacks(id).await?;
        let (routes, dues) = callbacks.routes(self, &keys.record);
        Ok(BatchStep {
            keys,
            routes,
            dues,
            keep: self.batch_retention(),
        })
    }

    /// The step that starts the batch `id`, which its chain reached, on one server: its keys,
    /// its callbacks' routes, and its parked jobs with their queues' keys.
    pub(crate) async fn batch_start_step(
        &self,
        id: Uuid,
    ) -> Result<(BatchStep, String, Vec<(Link, QueueKeys)>)> {
        let step = self.batch_step(id).await?;
        let parked = self.keys().batch_parked(&id.to_string());
        let stored: Vec<String> = self
            .query(redis::cmd("LRANGE").arg(&parked).arg(0).arg(-1))
            .await?;
        let links = stored
            .iter()
            .filter_map(|link| Link::decode(link))
            .map(|link| {
                let keys = self.queue_keys(&link.queue);
                (link, keys)
            })
            .collect();
        Ok((step, parked, links))
    }

    /// Acknowledges finished jobs of the batch `id` taken from `queue` (a queue's own list, or
    /// one of its groups), each given as its reserved copy and uuid, and counts them in the
    /// batch, in one step; returns how many reservations were still held (only those are
    /// counted). A group is then brought back if it was blocked at its limit.
    pub(crate) async fn complete_in_batch(
        &self,
        queue: &QueueKeys,
        id: Uuid,
        finished: &[(&str, Uuid)],
    ) -> Result<u64> {
        if finished.is_empty() {
            return Ok(0);
        }
        if self.layout() == KeyLayout::Cluster {
            // Counted in the batch's slot first, the reservations removed last.
            let jobs: Vec<Uuid> = finished.iter().map(|(_, uuid)| *uuid).collect();
            self.batch_done_on_cluster(id, &jobs).await?;
            let reserved: Vec<&str> = finished.iter().map(|(reserved, _)| *reserved).collect();
            return self.delete_many(queue, &reserved).await;
        }
        let step = self.batch_step(id).await?;
        let mut call = scripts::COMPLETE_BATCH.key(&queue.reserved);
        for key in step.keys() {
            call.key(key);
        }
        for arg in step.args() {
            call.arg(arg);
        }
        for (reserved, _) in finished {
            call.arg(*reserved);
        }
        for (_, uuid) in finished {
            call.arg(uuid.to_string());
        }
        let held = self.invoke(&call).await?;
        // A job of a group ended: its group comes back if it was blocked at its limit.
        if let (Some(group), true) = (&queue.group, held > 0) {
            self.bring_back(queue, &[group.as_str()]).await;
        }
        Ok(held)
    }
}
