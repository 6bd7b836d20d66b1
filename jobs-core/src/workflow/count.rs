//! Where a batch is counted: what a settling script needs to count a job of a batch (its keys
//! and its callbacks' routes), the step that starts a batch its chain reached, and finished
//! jobs of one batch acknowledged and counted together (`complete_batch.lua`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::warn;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::keys::{KeyLayout, QueueKeys};
use crate::queue::reserve::DeleteArgs;
use crate::queue::{scripts, RedisQueue, WorkerQueue};
use crate::workflow::link::Link;
use crate::workflow::record::{BatchKeys, PerBatch};

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
    /// The step that counts a job of the batch `id`, made once per batch: the acker takes it
    /// for every acknowledgement of the batch's jobs.
    pub(crate) async fn batch_step(&self, id: Uuid) -> Result<Arc<BatchStep>> {
        let cache = self
            .extensions()
            .get_or_insert_with(PerBatch::<BatchStep>::default);
        if let Some(step) = cache.get(id) {
            return Ok(step);
        }
        let keys = self.batch_keys(id);
        let callbacks = self.batch_callbacks(id).await?;
        let (routes, dues) = callbacks.routes(self, &keys.record);
        let step = BatchStep {
            keys,
            routes,
            dues,
            keep: self.batch_retention(),
        };
        Ok(cache.keep(id, step))
    }

    /// The step that starts the batch `id`, which its chain reached, on one server: its keys,
    /// its callbacks' routes, and its parked jobs with their queues' keys.
    pub(crate) async fn batch_start_step(
        &self,
        id: Uuid,
    ) -> Result<(Arc<BatchStep>, String, Vec<(Link, QueueKeys)>)> {
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
}

/// Whether this handle's server has `complete_batch.lua` loaded, as far as the handle knows: a
/// batch's acknowledgement loads it in its `MULTI` until then, and again after a `NOSCRIPT`.
#[derive(Default)]
struct BatchCheckLoaded(AtomicBool);

/// Which finished jobs of one batch to acknowledge and count: `finished`, each given as its
/// reserved copy and uuid, of the batch `batch`, taken from `queue`.
#[derive(Debug, Clone, Copy)]
pub struct BatchCompleteArgs<'a> {
    /// The queue the jobs were reserved from.
    pub queue: &'a QueueKeys,
    /// The batch they belong to.
    pub batch: Uuid,
    /// Each job's reserved copy and uuid.
    pub finished: &'a [(&'a str, Uuid)],
}

impl WorkerQueue<'_> {
    /// Acknowledges finished jobs of the batch `id` taken from `queue` (a queue's own list, or
    /// one of its groups), each given as its reserved copy and uuid, and counts them in the
    /// batch, each once by its uuid, in one step; returns how many reservations were still
    /// held. A group is then brought back if it was blocked at its limit.
    ///
    /// The step is a `MULTI` of native commands and one script call that takes no job: `SREM`
    /// of the uuids from the batch's pending set and `ZREM` from its failed set (a failed job
    /// retried by hand that succeeded), `ZREM` of the reserved copies, then
    /// `complete_batch.lua`, which sets the batch's counts from its sets and pushes its
    /// callbacks once the last job is counted. Handing a hundred reserved copies to a script
    /// cost Redis about three times what these commands cost (docs/benchmarks.md). A job is
    /// so counted even when its reservation lapsed and another worker took it: it ran to its
    /// end, and the other run cannot count it again.
    pub async fn complete_in_batch(&self, complete: BatchCompleteArgs<'_>) -> Result<u64> {
        if !self.durable_acks() {
            return self.complete_in_batch_now(complete).await;
        }
        let write = |lane: RedisQueue| async move {
            WorkerQueue::of(&lane).complete_in_batch_now(complete).await
        };
        // Boxed: the durable path's future would weigh on every acknowledgement's.
        Box::pin(self.acknowledged(write)).await
    }

    async fn complete_in_batch_now(&self, complete: BatchCompleteArgs<'_>) -> Result<u64> {
        let BatchCompleteArgs {
            queue,
            batch: id,
            finished,
        } = complete;
        let handle = self.handle;
        if finished.is_empty() {
            return Ok(0);
        }
        let reserved: Vec<&str> = finished.iter().map(|(reserved, _)| *reserved).collect();
        if handle.layout() == KeyLayout::Cluster {
            // Counted in the batch's slot first, the reservations removed last.
            let jobs: Vec<Uuid> = finished.iter().map(|(_, uuid)| *uuid).collect();
            handle.batch_done_on_cluster(id, &jobs).await?;
            return self.delete(DeleteArgs::new(queue, &reserved)).await;
        }
        // Written into one buffer, not one string each: a hundred or more per call.
        let texts: Vec<[u8; uuid::fmt::Hyphenated::LENGTH]> = finished
            .iter()
            .map(|(_, uuid)| {
                let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
                uuid.hyphenated().encode_lower(&mut text);
                text
            })
            .collect();
        let uuids: Vec<&[u8; uuid::fmt::Hyphenated::LENGTH]> = texts.iter().collect();
        let step = handle.batch_step(id).await?;
        let mut check = scripts::COMPLETE_BATCH.prepare_invoke();
        for key in step.keys() {
            check.key(key);
        }
        for arg in step.args() {
            check.arg(arg);
        }
        let loaded = handle
            .extensions()
            .get_or_insert_with(BatchCheckLoaded::default);
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        if !loaded.0.load(Ordering::Relaxed) {
            // In the MULTI: its EVALSHA cannot meet a flush made between the two.
            pipe.load_script(&scripts::COMPLETE_BATCH).ignore();
        }
        pipe.cmd("SREM").arg(&step.keys.pending).arg(&uuids);
        pipe.cmd("ZREM").arg(&step.keys.failed).arg(&uuids);
        pipe.cmd("ZREM").arg(&queue.reserved).arg(&reserved);
        pipe.invoke_script(&check);
        type Reply<T> = redis::RedisResult<T>;
        let (counted, failed_again, held, checked): (
            Reply<u64>,
            Reply<u64>,
            Reply<u64>,
            Reply<i64>,
        ) = handle.query_pipe(&pipe).await?;
        counted?;
        failed_again?;
        let held = held?;
        match checked {
            Ok(_) => loaded.0.store(true, Ordering::Relaxed),
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                // The server lost its scripts since this handle loaded it (a restart or
                // `SCRIPT FLUSH`): the jobs are counted and their reservations gone; the batch's
                // step is taken now, the script loaded with it.
                loaded.0.store(false, Ordering::Relaxed);
                warn!(batch = %id, "the batch's step met NOSCRIPT after its jobs were counted; taking it again");
                handle.invoke::<i64>(&check).await?;
                loaded.0.store(true, Ordering::Relaxed);
            }
            Err(err) => return Err(err.into()),
        }
        // A job of a group ended: its group comes back if it was blocked at its limit.
        if let (Some(group), true) = (&queue.group, held > 0) {
            handle.bring_back(queue, &[group.as_str()]).await;
        }
        Ok(held)
    }
}
