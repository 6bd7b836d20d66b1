//! The worker's side of settling an attempt: a finished job goes to the acker, a released one
//! back to `:delayed`, a failed one to the failed-job store, each counted for the operators;
//! the scripts that settle it are jobs-core's queue layer.

use redjob::__worker::{CompleteArgs, FailArgs, ReleaseArgs, SettleSteps, Settlement, WorkerQueue};
use redjob::admin::AttemptOutcome;
use redjob::payload::counters;
use redjob::queue::hold::Holds;
use redjob::{FailedJob, RedisQueue};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

use crate::stats::Stats;

use super::acker::{AckSender, Completed};
use super::control::{Attempt, Control};
use super::execute::INTERRUPTED;
use super::outage::with_retries;
use super::reserved::{JobId, Reserved};
use super::rules::{Verdict, UNRUNNABLE_RETRY};
use super::time::unix_seconds;

/// What became of a job, for the worker's bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The handler finished.
    Done,
    /// The job was put back to run later (released, retried, or interrupted by shutdown).
    Released,
    /// The job failed for good; `recorded` when its failed-job record was written (its
    /// reservation was still held).
    Failed {
        /// The record was written.
        recorded: bool,
    },
    /// The watchdog took the job over and settled it.
    TakenOver,
}

/// What settling an attempt changes besides its reservation.
pub(crate) struct AttemptEffects<'a> {
    /// What the attempt holds.
    pub(crate) holds: &'a Holds,
    /// The steps the capabilities it belongs to take when it settles (a chain's next link, a
    /// batch's count).
    pub(crate) steps: SettleSteps,
}

/// Settles attempts: one for every job task of a worker, and a copy with a connection of its
/// own for the watchdog.
#[derive(Clone)]
pub(crate) struct Settler {
    /// Where settlements are written.
    pub(crate) queue: RedisQueue,
    /// How many replicas must have a completion or failure before it counts as made.
    pub(crate) durable_acks: redjob::Durability,
    /// Where finished jobs go to have their reservations deleted in batches.
    pub(crate) acks: AckSender,
    /// How long a release or failure is retried through a Redis outage: the reservation's
    /// length, after which the job comes back anyway.
    pub(crate) retry_after: Duration,
    /// The worker's counters.
    pub(crate) stats: Arc<Stats>,
    /// The per-minute counters and recent attempts published for operators.
    pub(crate) control: Arc<Control>,
}

impl Settler {
    /// The same settler writing through `queue` instead.
    pub(crate) fn with_queue(&self, queue: RedisQueue) -> Settler {
        Settler {
            queue,
            ..self.clone()
        }
    }

    /// Logs the verdict and applies it: a finished job goes to the acker (or, when it holds
    /// something or has steps to take, is acknowledged in the call that takes them); a released
    /// one back to `:delayed`; a failed one to the failed-job store with the payload as it was
    /// before this reservation. What the attempt held is freed in the same step; the unique
    /// lock only when the job is finished. Every verdict is counted in the per-minute metrics
    /// under the job's name (`?` when the payload has none).
    pub(crate) async fn settle(
        &self,
        job: Reserved,
        id: JobId<'_>,
        verdict: Verdict,
        error: Option<String>,
        runtime: Duration,
        effects: AttemptEffects<'_>,
    ) -> Settled {
        let duration_ms = (runtime.as_secs_f64() * 100_000.0).round() / 100.0;
        let release_reason = error.as_deref().unwrap_or("released by the job");
        self.record(&job, &id, &verdict, runtime, release_reason);
        match verdict {
            Verdict::Done | Verdict::Skip => {
                match verdict {
                    Verdict::Skip => info!(status = "SKIPPED", duration_ms, "SKIPPED"),
                    _ => info!(status = "DONE", duration_ms, "DONE"),
                }
                self.done(job, &id, effects).await
            }
            Verdict::Release(delay) | Verdict::Retry(delay) | Verdict::Requeue(delay) => {
                let status = match verdict {
                    Verdict::Requeue(_) => "REQUEUED",
                    _ => "RELEASED",
                };
                let retry_in_s = delay.as_secs_f64();
                let reason = release_reason;
                info!(status, duration_ms, retry_in_s, reason, "{status}");
                // Boxed, as the failure below: a finished job, the common case, needs neither,
                // and their state would weigh on every job's future.
                Box::pin(self.release(job, &verdict, delay, effects)).await
            }
            Verdict::Interrupt => {
                info!(
                    status = "INTERRUPTED",
                    duration_ms,
                    reason = INTERRUPTED,
                    "INTERRUPTED"
                );
                Box::pin(self.release(job, &verdict, Duration::ZERO, effects)).await
            }
            Verdict::Unrunnable(ref reason) => {
                let met_first = counters::counters(&job.raw).map_or(0, |c| c.unrunnable_since);
                let since = match met_first {
                    0 => unix_seconds(),
                    since => i64::from(since),
                };
                self.control
                    .met_unrunnable(id.job, &job.queue.name, since, reason);
                let retry_in_s = UNRUNNABLE_RETRY.as_secs_f64();
                warn!(
                    status = "UNRUNNABLE",
                    retry_in_s,
                    reason = %reason,
                    "UNRUNNABLE: back on its queue for a worker that can run it"
                );
                Box::pin(self.release(job, &verdict, UNRUNNABLE_RETRY, effects)).await
            }
            Verdict::Fail(reason) => {
                warn!(status = "FAILED", duration_ms, reason = %reason, "FAILED");
                Box::pin(self.fail(job, &id, reason, effects)).await
            }
        }
    }

    /// Counts the attempt for operators, under its outcome.
    fn record(
        &self,
        job: &Reserved,
        id: &JobId<'_>,
        verdict: &Verdict,
        runtime: Duration,
        release_reason: &str,
    ) {
        let (outcome, reason) = match verdict {
            Verdict::Done | Verdict::Skip => (AttemptOutcome::Done, None),
            Verdict::Release(_) | Verdict::Retry(_) => {
                (AttemptOutcome::Released, Some(release_reason))
            }
            Verdict::Requeue(_) => (
                AttemptOutcome::Released,
                Some("requeued: a limit or lock was busy"),
            ),
            Verdict::Interrupt => (AttemptOutcome::Released, Some(INTERRUPTED)),
            Verdict::Unrunnable(reason) => (AttemptOutcome::Released, Some(reason.as_str())),
            Verdict::Fail(reason) => (AttemptOutcome::Failed, Some(reason.as_str())),
        };
        self.control.record(&Attempt {
            queue: &job.queue.name,
            job: id.job,
            uuid: id.uuid,
            attempt: id.attempt,
            outcome,
            runtime,
            reason,
            tags: id.tags,
        });
    }

    /// A finished job: acknowledged by the acker when it holds nothing and has no steps but
    /// those the acknowledgement covers (or only a count in its batch, which the acker makes
    /// with the batch's other finished jobs), else in the call that frees its holds and takes
    /// its steps.
    async fn done(&self, job: Reserved, id: &JobId<'_>, effects: AttemptEffects<'_>) -> Settled {
        let AttemptEffects { holds, steps } = effects;
        let counted_in = match steps.as_slice() {
            [only] => only.counted_in(),
            _ => None,
        };
        // A step whose only effect the acker's own acknowledgement makes (a queue's
        // `completed` event) leaves the job to the acker.
        let acker_covers = steps.iter().all(|step| step.covered_by_acknowledgement());
        match (holds.is_empty(), acker_covers, counted_in) {
            (true, true, _) => {
                // A step the acknowledgement covers is the job's `completed` event: the acker
                // is told what the payload says rather than reading it again.
                let event = (!steps.is_empty()).then(|| Completed {
                    uuid: id.uuid.to_owned(),
                    job: id.job.to_owned(),
                    attempt: id.attempt,
                });
                self.acks.ack(job, event)
            }
            (true, false, Some(counted)) => self.acks.ack_in_batch(job, counted.group, counted.job),
            _ => {
                // Boxed, as the call below: its space would weigh on every job's future.
                let settlement = Box::new(Settlement {
                    holds: holds.to_free(true),
                    steps,
                });
                let complete = CompleteArgs {
                    queue: &job.queue,
                    reserved: &job.raw,
                    settlement: &settlement,
                };
                Box::pin(self.apply(&job, "acknowledge the job", |q| async move {
                    q.complete(complete).await
                }))
                .await;
            }
        }
        Settled::Done
    }

    /// A job put back to run later: a requeue puts back a copy with its attempt given back, an
    /// interrupted job one with its attempt given back and its interruption counted, a retry
    /// one with its failure counted; a release puts back the reserved copy itself. What
    /// it held for the attempt is freed.
    async fn release(
        &self,
        job: Reserved,
        verdict: &Verdict,
        delay: Duration,
        effects: AttemptEffects<'_>,
    ) -> Settled {
        let replacement = match verdict {
            Verdict::Requeue(_) => counters::requeued(&job.raw),
            Verdict::Interrupt => counters::interrupted(&job.raw),
            Verdict::Unrunnable(_) => {
                let now = u32::try_from(unix_seconds()).unwrap_or(u32::MAX);
                counters::unrunnable(&job.raw, now)
            }
            Verdict::Retry(_) => counters::after_exception(&job.raw),
            _ => None,
        };
        let settlement = Settlement {
            holds: effects.holds.to_free(false),
            steps: effects.steps,
        };
        let release = ReleaseArgs {
            queue: &job.queue,
            reserved: &job.raw,
            delay,
            replacement: replacement.as_deref(),
            settlement: &settlement,
        };
        self.apply(&job, "release the job", |q| async move {
            q.release(release).await
        })
        .await;
        Settled::Released
    }

    /// A job reserved but never started, put back at once as it was before its reservation:
    /// its attempt is not counted.
    pub(crate) async fn give_back(&self, job: Reserved) -> Settled {
        let unreserved = redjob::payload::unreserved(&job.raw);
        let settlement = Settlement::default();
        let release = ReleaseArgs {
            queue: &job.queue,
            reserved: &job.raw,
            delay: Duration::ZERO,
            replacement: Some(&unreserved),
            settlement: &settlement,
        };
        self.apply(&job, "put the job back", |q| async move {
            q.release(release).await
        })
        .await;
        Settled::Released
    }

    /// A job that failed for good: its record written, its holds freed and its steps taken in
    /// the same step, its `failed()` hook owed there when it has one.
    async fn fail(
        &self,
        job: Reserved,
        id: &JobId<'_>,
        reason: String,
        effects: AttemptEffects<'_>,
    ) -> Settled {
        let failed = FailedJob::new(
            id.uuid,
            &self.queue.config().connection_name,
            &job.queue.name,
            redjob::payload::unreserved(&job.raw),
            reason,
        );
        self.stats.record_failure();
        let reserved = job.unreadable.as_deref().unwrap_or(job.raw.as_bytes());
        // Not boxed, unlike a finished job's: this whole call runs boxed.
        let settlement = Settlement {
            holds: effects.holds.to_free(true),
            steps: effects.steps,
        };
        let fail = FailArgs {
            queue: &job.queue,
            reserved,
            record: &failed,
            settlement: &settlement,
            hook_claim: id.failed_hook.then_some(self.retry_after),
        };
        let recorded = self
            .apply(&job, "record the failed job", |q| async move {
                q.fail(fail).await
            })
            .await;
        Settled::Failed { recorded }
    }

    /// Runs a Redis change for a job, retrying through short outages. If Redis stays away
    /// longer than the reservation lasts, the job comes back after retry_after and nothing is
    /// lost. A change refused because the reservation is no longer held is logged. Returns
    /// whether the change was made. It runs boxed: a finished job, the common case, is
    /// acknowledged without it, and its state would weigh on every job's future.
    async fn apply<'a, F, Fut>(&'a self, job: &Reserved, what: &str, op: F) -> bool
    where
        F: Fn(WorkerQueue<'a>) -> Fut,
        Fut: std::future::Future<Output = redjob::Result<bool>>,
    {
        let queue = WorkerQueue::of(&self.queue).acknowledging(self.durable_acks);
        let held = with_retries(self.retry_after, what, || op(queue)).await;
        if held == Some(false) {
            warn!(queue = %job.queue.name, "the reservation was no longer held; nothing changed");
        }
        held == Some(true)
    }
}
