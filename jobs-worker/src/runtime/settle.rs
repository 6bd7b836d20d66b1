//! Settling an attempt in Redis: a finished job goes to the acker, a released one back to
//! `:delayed`, a failed one to the failed-job store, each counted for the operators.

use jobs_core::admin::telemetry::Outcome;
use jobs_core::{FailedJob, RedisQueue};
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
    /// The job went to the failed-job store.
    Failed,
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

    /// Logs the verdict and applies it: a finished job goes to the acker; a released one back
    /// to `:delayed`; a failed one to the failed-job store with the payload as it was before
    /// this reservation. Every verdict is counted in the per-minute metrics under the job's
    /// name (`?` when the payload has none).
    pub(crate) async fn settle(
        &self,
        job: Reserved,
        id: JobId<'_>,
        verdict: Verdict,
        error: Option<String>,
        started: Instant,
    ) -> Settled {
        let uuid = id.uuid;
        let runtime = started.elapsed();
        let duration_ms = (runtime.as_secs_f64() * 100_000.0).round() / 100.0;
        let release_reason = error.as_deref().unwrap_or("released by the job");
        let (outcome, reason) = match &verdict {
            Verdict::Done => (Outcome::Done, None),
            Verdict::Release(_) => (Outcome::Released, Some(release_reason)),
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
        });
        match verdict {
            Verdict::Done => {
                info!(status = "DONE", duration_ms, "DONE");
                self.acks.ack(job);
                Settled::Done
            }
            Verdict::Release(delay) => {
                let retry_in_s = delay.as_secs_f64();
                info!(
                    status = "RELEASED",
                    duration_ms,
                    retry_in_s,
                    reason = release_reason,
                    "RELEASED"
                );
                self.apply(&job, "release the job", |q| {
                    q.release(&job.queue, &job.raw, delay)
                })
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
                self.apply(&job, "record the failed job", |q| {
                    q.fail_bytes(&job.queue, reserved, &failed)
                })
                .await;
                Settled::Failed
            }
        }
    }

    /// Runs a Redis change for a job, retrying through short outages. If Redis stays away
    /// longer than the reservation lasts, the job comes back after retry_after and nothing is
    /// lost. A change refused because the reservation is no longer held is logged.
    async fn apply<'a, F, Fut>(&'a self, job: &Reserved, what: &str, op: F)
    where
        F: Fn(&'a RedisQueue) -> Fut,
        Fut: std::future::Future<Output = jobs_core::Result<bool>>,
    {
        let held = with_retries(self.retry_after, what, || op(&self.queue)).await;
        if held == Some(false) {
            warn!(queue = %job.queue.name, "the reservation was no longer held; nothing changed");
        }
    }
}
