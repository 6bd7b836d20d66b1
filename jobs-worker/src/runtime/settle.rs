//! Settling an attempt in Redis: a finished job goes to the acker, a released one back to
//! `:delayed`, a failed one to the failed-job store, each counted for the operators.

use jobs_core::admin::telemetry::Outcome;
use jobs_core::payload::counters;
use jobs_core::queue::hold::Holds;
use jobs_core::workflow::{BatchProgress, ChainProgress};
use jobs_core::{FailedJob, RedisQueue, Settlement};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

use crate::stats::Stats;

use super::acker::AckSender;
use super::control::{Attempt, Control};
use super::outage::with_retries;
use super::reserved::{JobId, Reserved};
use super::rules::Verdict;

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
}

/// What settling an attempt changes besides its reservation.
pub(crate) struct AttemptEffects<'a> {
    /// What the attempt holds.
    pub(crate) holds: &'a Holds,
    /// For a job of a workflow, its steps. Boxed: most jobs belong to none, and every job's
    /// future would carry the space.
    pub(crate) workflow: Option<Box<Workflow>>,
}

/// The workflow steps of an attempt.
#[derive(Debug, Default)]
pub(crate) struct Workflow {
    /// The chain the job is a link of, with the links its handler added.
    pub(crate) chain: Option<ChainProgress>,
    /// The batch the job belongs to, with the jobs its handler added.
    pub(crate) batch: Option<BatchProgress>,
}

impl Workflow {
    /// The steps, boxed, or `None` when there are none.
    pub(crate) fn of(
        chain: Option<ChainProgress>,
        batch: Option<BatchProgress>,
    ) -> Option<Box<Workflow>> {
        (chain.is_some() || batch.is_some()).then(|| Box::new(Workflow { chain, batch }))
    }
}

/// Settles attempts: one for every job task of a worker, and a copy with a connection of its
/// own for the watchdog.
#[derive(Clone)]
pub(crate) struct Settler {
    /// Where settlements are written.
    pub(crate) queue: RedisQueue,
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
    /// something, is acknowledged in the call that frees it); a released one back to
    /// `:delayed`; a failed one to the failed-job store with the payload as it was before this
    /// reservation. What the attempt held is freed in the same step; the unique lock only when
    /// the job is finished. A link of a `chain` pushes the next link when it is done, the
    /// chain's catch job when it fails, in the same step. Every verdict is counted in the per-minute metrics under the job's
    /// name (`?` when the payload has none).
    pub(crate) async fn settle(
        &self,
        job: Reserved,
        id: JobId<'_>,
        verdict: Verdict,
        error: Option<String>,
        started: Instant,
        effects: AttemptEffects<'_>,
    ) -> Settled {
        let AttemptEffects { holds, workflow } = effects;
        let uuid = id.uuid;
        let runtime = started.elapsed();
        let duration_ms = (runtime.as_secs_f64() * 100_000.0).round() / 100.0;
        let release_reason = error.as_deref().unwrap_or("released by the job");
        let (outcome, reason) = match &verdict {
            Verdict::Done | Verdict::Skip => (Outcome::Done, None),
            Verdict::Release(_) | Verdict::Retry(_) => (Outcome::Released, Some(release_reason)),
            Verdict::Requeue(_) => (
                Outcome::Released,
                Some("requeued: a limit or lock was busy"),
            ),
            Verdict::Fail(reason) => (Outcome::Failed, Some(reason.as_str())),
        };
        self.control.record(&Attempt {
            queue: &job.queue.name,
            job: id.job,
            uuid,
            attempt: id.attempt,
            outcome,
            runtime,
            reason,
            tags: id.tags,
        });
        match verdict {
            Verdict::Done | Verdict::Skip => {
                match verdict {
                    Verdict::Skip => info!(status = "SKIPPED", duration_ms, "SKIPPED"),
                    _ => info!(status = "DONE", duration_ms, "DONE"),
                }
                let Workflow { chain, batch } = workflow.map(|w| *w).unwrap_or_default();
                let counted_only = batch.as_ref().filter(|b| b.added.is_empty());
                if holds.is_empty() && chain.is_none() && batch.is_none() {
                    self.acks.ack(job);
                } else if let (true, None, Some(batch)) = (holds.is_empty(), &chain, counted_only) {
                    // Counted in its batch by the acker, with the batch's other finished jobs.
                    self.acks.ack_in_batch(job, batch.id, batch.job);
                } else {
                    // Boxed, as the call below: its space would weigh on every job's future.
                    let settlement = Box::new(Settlement {
                        holds: holds.to_free(true),
                        chain,
                        batch,
                    });
                    Box::pin(self.apply(&job, "acknowledge the job", |q| {
                        q.complete(&job.queue, &job.raw, &settlement)
                    }))
                    .await;
                }
                Settled::Done
            }
            Verdict::Release(delay) | Verdict::Retry(delay) | Verdict::Requeue(delay) => {
                let retry_in_s = delay.as_secs_f64();
                // A requeue puts back a copy with its attempt given back, a retry one with its
                // failure counted; a release puts back the reserved copy itself.
                let replacement = match verdict {
                    Verdict::Requeue(_) => counters::requeued(&job.raw),
                    Verdict::Retry(_) => counters::after_exception(&job.raw),
                    _ => None,
                };
                let status = match verdict {
                    Verdict::Requeue(_) => "REQUEUED",
                    _ => "RELEASED",
                };
                info!(
                    status,
                    duration_ms,
                    retry_in_s,
                    reason = release_reason,
                    "{status}"
                );
                let held = holds.to_free(false);
                Box::pin(self.apply(&job, "release the job", |q| {
                    q.release_with(&job.queue, &job.raw, delay, replacement.as_deref(), &held)
                }))
                .await;
                Settled::Released
            }
            Verdict::Fail(reason) => {
                warn!(status = "FAILED", duration_ms, reason = %reason, "FAILED");
                let failed = FailedJob::new(
                    uuid,
                    &self.queue.config().connection_name,
                    &job.queue.name,
                    jobs_core::payload::unreserved(&job.raw),
                    reason,
                );
                self.stats.record_failure();
                let reserved = job.unreadable.as_deref().unwrap_or(job.raw.as_bytes());
                let Workflow { chain, batch } = workflow.map(|w| *w).unwrap_or_default();
                let settlement = Box::new(Settlement {
                    holds: holds.to_free(true),
                    chain,
                    batch,
                });
                let hook_claim = id.failed_hook.then_some(self.retry_after);
                let recorded = Box::pin(self.apply(&job, "record the failed job", |q| {
                    q.fail_with(&job.queue, reserved, &failed, &settlement, hook_claim)
                }))
                .await;
                Settled::Failed { recorded }
            }
        }
    }

    /// Runs a Redis change for a job, retrying through short outages. If Redis stays away
    /// longer than the reservation lasts, the job comes back after retry_after and nothing is
    /// lost. A change refused because the reservation is no longer held is logged. Returns
    /// whether the change was made. Callers box it: a finished job, the common case, is
    /// acknowledged without it, and its state would weigh on every job's future.
    async fn apply<'a, F, Fut>(&'a self, job: &Reserved, what: &str, op: F) -> bool
    where
        F: Fn(&'a RedisQueue) -> Fut,
        Fut: std::future::Future<Output = jobs_core::Result<bool>>,
    {
        let held = with_retries(self.retry_after, what, || op(&self.queue)).await;
        if held == Some(false) {
            warn!(queue = %job.queue.name, "the reservation was no longer held; nothing changed");
        }
        held == Some(true)
    }
}
