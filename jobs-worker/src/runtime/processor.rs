//! The processor: everything that happens to one reserved job, from decoding its payload to
//! settling it in Redis.
//!
//! `Processor::process` is the single path every job takes: [`decode`](super::decode) the
//! payload -> check attempts and [`execute`](super::execute) the handler -> verdict ->
//! [`settle`](super::settle). Job middleware and lifecycle events hook in around `execute`.

use jobs_core::{Backoff, RedisQueue};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::options::WorkerOptions;
use crate::runtime::acker::AckSender;
use crate::runtime::control::Control;
use crate::runtime::decode::decode;
use crate::runtime::lease::Running;
use crate::runtime::reserved::{JobId, Reserved};
use crate::runtime::rules::Verdict;
use crate::stats::Stats;

/// What the processor did with a job, for the worker's bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The handler finished.
    Done,
    /// The job was put back to run later (released, retried, or interrupted by shutdown).
    Released,
    /// The job went to the failed-job store.
    Failed,
}

/// Runs jobs and settles them.
#[derive(Clone)]
pub(crate) struct Processor {
    pub(super) queue: RedisQueue,
    pub(super) acks: AckSender,
    pub(super) running: Arc<Running>,
    pub(super) options: Arc<WorkerOptions>,
    pub(super) stats: Arc<Stats>,
    pub(super) control: Arc<Control>,
    /// The backoff of jobs that set none, worked out once from the options.
    pub(super) default_backoff: Backoff,
}

impl Processor {
    /// A processor writing through `queue`, acknowledging finished jobs through `acks` and
    /// keeping the jobs it runs in `running` (whose reservations the heartbeat extends), with
    /// the worker's options, counting attempts in `stats` and, per minute, in `control`.
    pub(crate) fn new(
        queue: RedisQueue,
        acks: AckSender,
        running: Arc<Running>,
        options: Arc<WorkerOptions>,
        stats: Arc<Stats>,
        control: Arc<Control>,
    ) -> Self {
        Processor {
            queue,
            acks,
            running,
            default_backoff: options.effective_backoff(),
            options,
            stats,
            control,
        }
    }

    /// The same processor writing through `queue` instead.
    pub(crate) fn with_queue(&self, queue: RedisQueue) -> Processor {
        Processor {
            queue,
            ..self.clone()
        }
    }

    /// Processes one reserved job to the end. When `interrupt` fires, a running handler is
    /// stopped and the job is put back on its queue at once, its attempt counted.
    pub(crate) async fn process(&self, job: Reserved, interrupt: CancellationToken) -> Settled {
        let started = Instant::now();
        let held = self.running.hold(&job);
        let _counted = crate::prometheus::running_job();
        let decoded = decode(&job, self.queue.config());
        match decoded {
            Ok(decoded) => {
                let payload = &decoded.payload;
                let uuid = payload.uuid.to_string();
                let span = job_span(
                    &payload.display_name,
                    &uuid,
                    &job.queue.name,
                    payload.attempts,
                );
                async {
                    let (verdict, error) = self.run(&decoded, &job, &held, interrupt).await;
                    let id = JobId {
                        uuid: &uuid,
                        job: &payload.job,
                        attempt: payload.attempts,
                    };
                    self.settle(job, id, verdict, error, started).await
                }
                .instrument(span)
                .await
            }
            Err(undecodable) => {
                let span = tracing::info_span!(
                    "job",
                    job = "?",
                    uuid = %undecodable.uuid,
                    queue = %job.queue.name,
                );
                let verdict = Verdict::Fail(undecodable.reason);
                let id = JobId {
                    uuid: &undecodable.uuid,
                    job: &undecodable.job,
                    attempt: 0,
                };
                self.settle(job, id, verdict, None, started)
                    .instrument(span)
                    .await
            }
        }
    }
}

/// The span every line about one attempt of a job is logged in.
pub(crate) fn job_span(display_name: &str, uuid: &str, queue: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!("job", job = %display_name, uuid = %uuid, queue = %queue, attempt)
}

