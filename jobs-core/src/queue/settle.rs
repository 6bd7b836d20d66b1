//! Where a job is settled: acknowledged when done (`complete.lua`), released to run again
//! (`release.lua`), or recorded as failed (`fail.lua`), each with what settling it changes
//! besides its reservation in the same step.
//!
//! The queue layer frees what the job held. Everything else a capability needs done when a job
//! settles (a chain's next link, a batch's count) it adds as a [`SettleStep`]: on one server
//! the step adds named effects to the same script call, so the reservation's removal and every
//! effect are one atomic step; on a cluster, where the keys are in other slots, the step takes
//! itself in calls of its own that can each be taken again, before the reservation is removed.

use async_trait::async_trait;
use redis::AsyncCommands;
use smallvec::SmallVec;
use std::time::Duration;

use crate::error::Result;
use crate::payload::failed::FailedJob;
use crate::queue::due::seconds_arg;
use crate::queue::effects::Effects;
use crate::queue::handle::RedisQueue;
use crate::queue::hold::Hold;
use crate::queue::keys::{KeyLayout, QueueKeys};
use crate::queue::protocol::WorkerQueue;
use crate::queue::reserve::DeleteArgs;
use crate::queue::scripts;

/// How a job ended, for the steps that settle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It is done.
    Done,
    /// It failed for good.
    Failed,
    /// It goes back to its queue, to run again later.
    Released,
}

/// A capability's part in settling a job: done, failed for good, or released to run again.
#[async_trait]
pub trait SettleStep: Send + Sync + std::fmt::Debug {
    /// On one server: adds this step's effects to the settling script's call.
    async fn effects(
        &self,
        queue: &RedisQueue,
        ending: Ending,
        effects: &mut Effects,
    ) -> Result<()>;

    /// On a cluster: takes this step in calls of its own, each of which can be taken again
    /// with the same result, before the job's reservation is removed.
    async fn on_cluster(&self, queue: &RedisQueue, ending: Ending) -> Result<()>;

    /// The group (a batch) this step only counts a done job in, when that is all it does: the
    /// worker then acknowledges the job together with the group's other finished jobs in one
    /// call, which counts them in the same step.
    fn counted_in(&self) -> Option<CountedIn> {
        None
    }

    /// Whether acknowledging a done job by itself, as the worker's acker does in batches,
    /// already does all this step does (a queue's `completed` event, which the acknowledging
    /// call appends for a queue whose events are on): the worker then lets the acker settle
    /// it. Default: no.
    fn covered_by_acknowledgement(&self) -> bool {
        false
    }
}

/// A done job that its settle step only counts in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountedIn {
    /// The group: a batch's id.
    pub group: uuid::Uuid,
    /// The job's uuid, by which the group counts it once.
    pub job: uuid::Uuid,
}

/// The steps that settle one job, one per capability that has one. Most jobs have none or one
/// (a batch's count, a chain's next link), kept inline: every job is settled through them, and
/// a list allocated for one box would be one allocation more per job.
pub type SettleSteps = SmallVec<[Box<dyn SettleStep>; 1]>;

/// What settling a job changes besides its reservation, applied in the same step.
#[derive(Debug, Default)]
pub struct Settlement {
    /// What the job held: freed (when it comes back, only what it held for the attempt).
    pub holds: Vec<Hold>,
    /// The capabilities' steps: a chain's next link, a batch's count, ...
    pub steps: SettleSteps,
}

/// Which job to acknowledge as done: `reserved`, of `queue`, applying `settlement`.
#[derive(Debug, Clone, Copy)]
pub struct CompleteArgs<'a> {
    /// The queue the job was reserved from.
    pub queue: &'a QueueKeys,
    /// Its reserved copy.
    pub reserved: &'a str,
    /// What else settling it changes.
    pub settlement: &'a Settlement,
}

/// Which job to release to run again: `reserved`, of `queue`, due after `delay`.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseArgs<'a> {
    /// The queue the job was reserved from.
    pub queue: &'a QueueKeys,
    /// Its reserved copy.
    pub reserved: &'a str,
    /// How long until it is due again.
    pub delay: Duration,
    /// The payload to put back instead of the reserved copy (a requeue that costs no
    /// attempt), if any.
    pub replacement: Option<&'a str>,
    /// What else releasing it changes.
    pub settlement: &'a Settlement,
}

/// Which job to record as failed: `record`, reserved as `reserved` from `queue`.
#[derive(Debug, Clone, Copy)]
pub struct FailArgs<'a> {
    /// The queue the job was reserved from.
    pub queue: &'a QueueKeys,
    /// Its reserved copy, as bytes that need not be UTF-8; empty for a job that was never
    /// reserved.
    pub reserved: &'a [u8],
    /// The failed-job record.
    pub record: &'a FailedJob,
    /// What else failing it changes.
    pub settlement: &'a Settlement,
    /// For a job with a `failed()` hook, how long the worker failing it has to run the hook
    /// before another one may ([`WorkerQueue::hook_done`]).
    pub hook_claim: Option<Duration>,
}

impl WorkerQueue<'_> {
    /// Moves a reserved job to the delayed set, due after `release.delay`, putting
    /// `release.replacement` back instead of the reserved copy when given, and applying the
    /// settlement (what it held for the attempt, its status) in the same step. Returns
    /// `false`, changing nothing, when the reservation was no longer held.
    ///
    /// On a cluster the holds and the steps' keys live in other slots: they are freed and
    /// taken first, and the job is released after.
    pub async fn release(&self, release: ReleaseArgs<'_>) -> Result<bool> {
        let ReleaseArgs {
            queue,
            reserved,
            delay,
            replacement,
            settlement,
        } = release;
        let mut effects = self.settle_effects(settlement, Ending::Released).await?;
        effects.group(queue, true);
        let mut call = scripts::RELEASE.key(&queue.reserved);
        call.key(&queue.delayed)
            .key(&queue.notify)
            .arg(reserved)
            .arg(seconds_arg(delay))
            .arg(replacement.unwrap_or(""));
        effects.add_to(&mut call);
        let released: u64 = self.handle.invoke(&call).await?;
        Ok(released == 1)
    }

    /// Acknowledges a finished job and applies its settlement in the same step. Returns
    /// `false`, changing nothing, when the reservation was no longer held.
    ///
    /// On a cluster the holds and the steps' keys live in other slots: they are freed and
    /// taken first, and the reservation is removed last, so a crash between the two leaves a
    /// job that runs again rather than a lock that outlives its job.
    pub async fn complete(&self, complete: CompleteArgs<'_>) -> Result<bool> {
        if !self.durable_acks() {
            return self.complete_now(complete).await;
        }
        let write =
            |lane: RedisQueue| async move { WorkerQueue::of(&lane).complete_now(complete).await };
        // Boxed: the durable path's future would weigh on every acknowledgement's.
        Box::pin(self.acknowledged(write)).await
    }

    async fn complete_now(&self, complete: CompleteArgs<'_>) -> Result<bool> {
        let CompleteArgs {
            queue,
            reserved,
            settlement,
        } = complete;
        let mut effects = self.settle_effects(settlement, Ending::Done).await?;
        effects.group(queue, false);
        let mut call = scripts::COMPLETE.key(&queue.reserved);
        call.arg(reserved);
        effects.add_to(&mut call);
        let completed: u64 = self.handle.invoke(&call).await?;
        if completed == 2 {
            tracing::warn!(
                queue = %queue.name,
                "a step of settling the job found its state changed while the job ran, and left it as it was"
            );
        }
        Ok(completed >= 1)
    }

    /// Records a failed job, removing its reservation and applying its settlement, and prunes
    /// the failed-job store. For a job with a `failed()` hook, its call is owed in the same
    /// step as the record. Returns `false`, changing nothing, when the reservation was no
    /// longer held.
    ///
    /// On one server this is one atomic script call. On a cluster the reservation and the
    /// failed-job store live in different slots, so it takes three calls, each within one slot,
    /// in an order that loses nothing: check that the reservation is held, record the failure,
    /// then remove the reservation. Should the worker die between the last two, the
    /// reservation expires and the job runs again; a second failure overwrites the same record.
    pub async fn fail(&self, fail: FailArgs<'_>) -> Result<bool> {
        if !self.durable_acks() {
            return self.fail_now(fail).await;
        }
        let write = |lane: RedisQueue| async move { WorkerQueue::of(&lane).fail_now(fail).await };
        // Boxed: the durable path's future would weigh on every acknowledgement's.
        Box::pin(self.acknowledged(write)).await
    }

    async fn fail_now(&self, fail: FailArgs<'_>) -> Result<bool> {
        let FailArgs {
            queue,
            reserved,
            record,
            settlement,
            hook_claim,
        } = fail;
        let handle = self.handle;
        let layout = handle.layout();
        let separate_removal = !reserved.is_empty() && layout == KeyLayout::Cluster;
        if separate_removal {
            let held: Option<f64> = handle
                .call(|mut conn| async move { conn.zscore(&queue.reserved, reserved).await })
                .await?;
            if held.is_none() {
                return Ok(false);
            }
        }
        let mut effects = self.settle_effects(settlement, Ending::Failed).await?;
        if !separate_removal {
            effects.group(queue, false);
        }
        let mut call = scripts::FAIL.key(handle.keys().failed_jobs());
        call.key(handle.keys().failed_jobs_index())
            .key(handle.keys().failed_hooks());
        match layout {
            KeyLayout::Standalone => call.key(&queue.reserved).arg(reserved),
            KeyLayout::Cluster => call.arg(""),
        };
        call.arg(&record.uuid)
            .arg(record.to_json())
            .arg(handle.config.failed_max_jobs)
            .arg(handle.config.failed_max_age.as_secs())
            .arg(hook_claim.map_or(String::new(), seconds_arg));
        effects.add_to(&mut call);
        let recorded: u64 = handle.invoke(&call).await?;
        if separate_removal {
            // As the acker removes a finished job, so a group's brings its group back; a copy
            // that is not UTF-8 is removed by its bytes alone.
            match std::str::from_utf8(reserved) {
                Ok(member) => {
                    self.delete(DeleteArgs::new(queue, &[member])).await?;
                }
                Err(_) => {
                    handle
                        .call(|mut conn| async move {
                            conn.zrem::<_, _, ()>(&queue.reserved, reserved).await
                        })
                        .await?;
                }
            }
        }
        Ok(recorded == 1)
    }

    /// The effects the settling call applies: on one server, the holds and every step's; on a
    /// cluster none, the holds being freed and the steps taken here, in calls of their own.
    async fn settle_effects(&self, settlement: &Settlement, ending: Ending) -> Result<Effects> {
        let holds = self.free_on_cluster(&settlement.holds).await?;
        let mut effects = Effects::default();
        effects.holds(holds);
        let handle = self.handle;
        for step in &settlement.steps {
            match handle.layout() {
                KeyLayout::Standalone => step.effects(handle, ending, &mut effects).await?,
                KeyLayout::Cluster => step.on_cluster(handle, ending).await?,
            }
        }
        Ok(effects)
    }
}
