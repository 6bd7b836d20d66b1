//! The processor: everything that happens to one reserved job, from decoding its payload to
//! settling it in Redis.
//!
//! `Processor::process` is the single path every job takes: [`decode`](super::decode) the
//! payload -> check attempts and [`execute`](super::execute) the handler -> verdict ->
//! [`settle`](super::settler) -> tell the listeners -> run a failed job's `failed()` hook
//! ([`hooks`](super::hooks)).

use redjob::__worker::{Reservation, SettleSteps};
use redjob::middleware::Layer;
use redjob::queue::hold::Holds;
use redjob::{FailedContext, JobContext, RedisQueue, State};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::WorkerConfig;
use crate::listeners::{Cause, JobEvent, Listeners};
use crate::runtime::cancelled::CancelledBatches;
use crate::runtime::cancels::CancelRequests;
use crate::runtime::decode::{decode, Decoded, Undecodable};
use crate::runtime::execute::{self, attempt_span, Surroundings};
use crate::runtime::hooks;
use crate::runtime::lease::{Held, Running};
use crate::runtime::reserved::{JobId, Reserved};
use crate::runtime::rules::{on_unrunnable, Verdict, UNRUNNABLE_RETRY};
use crate::runtime::settler::{AttemptEffects, Settled, Settler};
use crate::runtime::time::unix_seconds;

/// Runs jobs and settles them. One processor serves every job task of a worker.
pub(crate) struct Processor {
    /// Settles each attempt in Redis.
    pub(crate) settler: Settler,
    /// The running jobs, whose reservations the lease extends.
    pub(crate) running: Arc<Running>,
    /// The worker's configuration: the limits of jobs that set none.
    pub(crate) config: Arc<WorkerConfig>,
    /// The worker's middleware, around every job's own.
    pub(crate) middleware: Arc<[Layer]>,
    /// The worker's listeners.
    pub(crate) listeners: Listeners,
    /// The worker's Redis handle, shared by the contexts of the jobs it runs.
    pub(crate) redis: Arc<RedisQueue>,
    /// The application state the jobs it runs read.
    pub(crate) state: State,
    /// Whether the batches of the jobs it runs were cancelled.
    pub(crate) cancelled: CancelledBatches,
    /// The jobs asked to stop.
    pub(crate) cancels: Arc<CancelRequests>,
    /// This worker, as a running job's status names it: `<name>@<host>`.
    pub(crate) worker: String,
    /// Cancelled when the worker is asked to stop, which its jobs' contexts report.
    pub(crate) stopping: CancellationToken,
}

impl Processor {
    /// Tells the listeners how the attempt ended, once it is settled.
    async fn report(
        &self,
        event: &JobEvent,
        verdict: &Verdict,
        error: Option<&str>,
        settled: Settled,
    ) {
        let listeners = &self.listeners;
        let cause = match verdict {
            Verdict::Done | Verdict::Skip => {
                return listeners.emit("processed", |l| l.processed(event)).await;
            }
            Verdict::Retry(_) => Cause::Exception,
            Verdict::Requeue(_) => Cause::Requeued,
            Verdict::Interrupt => Cause::Shutdown,
            Verdict::Unrunnable(_) => Cause::Unrunnable,
            Verdict::Release(_) => Cause::Released,
            Verdict::Fail(reason) => {
                if let Some(error) = error {
                    listeners
                        .emit("exception", |l| l.exception(event, error))
                        .await;
                }
                if settled == (Settled::Failed { recorded: true }) {
                    listeners.emit("failed", |l| l.failed(event, reason)).await;
                }
                return;
            }
        };
        if let (Some(error), false) = (error, cause == Cause::Shutdown) {
            listeners
                .emit("exception", |l| l.exception(event, error))
                .await;
        }
        let after = match verdict {
            Verdict::Release(after) | Verdict::Retry(after) | Verdict::Requeue(after) => *after,
            Verdict::Interrupt => Duration::ZERO,
            Verdict::Unrunnable(_) => UNRUNNABLE_RETRY,
            Verdict::Done | Verdict::Skip | Verdict::Fail(_) => return,
        };
        listeners
            .emit("released", |l| l.released(event, after, cause))
            .await;
    }

    /// Processes one reserved job, `held` in the registry of this worker's reserved jobs, to
    /// the end. When `interrupt` fires, a running handler is stopped and the job is put back
    /// on its queue at once, its attempt given back.
    pub(crate) async fn process(
        &self,
        job: Reserved,
        held: Held,
        interrupt: CancellationToken,
    ) -> Settled {
        let started = Instant::now();
        let _counted = crate::prometheus::running_job();
        // The match ends before the attempt is awaited: a match's scrutinee lives to the end of
        // the match, and would be held in every job's future beside the decoded payload.
        let decoded = match decode(&job, self.settler.queue.config()) {
            Ok(decoded) => decoded,
            // Boxed: rare, and its state would weigh on every job's future.
            Err(undecodable) => {
                return Box::pin(self.fail_undecodable(job, undecodable, started)).await
            }
        };
        let mut uuid_text = [0; uuid::fmt::Hyphenated::LENGTH];
        let uuid = &*decoded
            .payload
            .uuid
            .hyphenated()
            .encode_lower(&mut uuid_text);
        let span = attempt_span(&self.config, &decoded, uuid, &job.queue.name);
        let attempt = Attempt {
            job,
            uuid,
            decoded: &decoded,
            held: &held,
            started,
        };
        self.run(attempt, interrupt).instrument(span).await
    }

    /// Runs a decoded job, settles it, tells the listeners and runs its `failed()` hook.
    async fn run(&self, attempt: Attempt<'_>, interrupt: CancellationToken) -> Settled {
        let Attempt {
            job,
            uuid,
            decoded,
            held,
            started,
        } = attempt;
        let payload = &decoded.payload;
        let event = self.processing(&job, decoded).await;
        let around = Surroundings {
            config: &self.config,
            middleware: &self.middleware,
            redis: &self.redis,
            state: &self.state,
            holds: held.holds().clone(),
            cancelled: Some(&self.cancelled),
            started,
            cancels: Some(&self.cancels),
            worker: &self.worker,
            stopping: Some(&self.stopping),
            reservation: decoded
                .registration
                .options()
                .resumable
                .then(|| Reservation {
                    queue: job.queue.clone(),
                    reserved: Arc::from(job.raw.as_str()),
                }),
            resume_from: None,
        };
        // Not boxed apart: the job's task boxes its whole processing once (`slot::run`), and
        // every job runs its attempt.
        let (verdict, error, attempt) =
            execute::run(around, decoded, &job.queue.name, Some(held), interrupt).await;
        if held.taken_over() {
            // Its handler blocked its thread past its timeout: the watchdog settled it.
            return Settled::TakenOver;
        }
        // How long the queue's jobs take, for reserving ahead. A requeued job did not run (a
        // limit or lock was busy): its few µs say nothing of that.
        let runtime = started.elapsed();
        if !matches!(verdict, Verdict::Requeue(_)) {
            self.settler.stats.record_runtime(runtime);
        }
        let ctx = attempt.context();
        let (verdict, steps) =
            execute::settle_steps(&attempt, &self.settler.queue, verdict, error.as_deref());
        let reported = event.map(|event| (event, verdict.clone(), error.clone()));
        let failure = match &verdict {
            Verdict::Fail(reason) => Some(reason.clone()),
            _ => None,
        };
        let id = JobId {
            uuid,
            job: &payload.job,
            attempt: payload.attempts,
            tags: &payload.tags,
            failed_hook: failure.is_some() && decoded.registration.options().failed_hook,
        };
        let effects = AttemptEffects {
            holds: ctx.holds(),
            steps,
        };
        let settled = self
            .settler
            .settle(job, id, verdict, error, runtime, effects)
            .await;
        // The failure may have cancelled its batch: the batch's next job here reads again.
        if let (Some(batch), Some(_)) = (payload.batch, &failure) {
            self.cancelled.forget(batch);
        }
        if let Some((event, verdict, error)) = reported {
            Box::pin(self.report(&event, &verdict, error.as_deref(), settled)).await;
        }
        if let Some(reason) = failure {
            Box::pin(self.after_failure(decoded, ctx, settled, reason)).await;
        }
        settled
    }

    /// The job's event for the listeners, once they are told it is processing; `None` when the
    /// worker has none. Listeners run boxed, so a worker without them carries none of their
    /// state in every job's future.
    async fn processing(&self, job: &Reserved, decoded: &Decoded) -> Option<JobEvent> {
        if self.listeners.is_empty() {
            return None;
        }
        let payload = &decoded.payload;
        let event = JobEvent {
            uuid: payload.uuid,
            job: payload.job.clone(),
            display_name: payload.display_name.clone(),
            queue: job.queue.name.clone(),
            attempt: payload.attempts,
        };
        Box::pin(self.listeners.emit("processing", |l| l.processing(&event))).await;
        Some(event)
    }

    /// After a job failed for good, once its record is written: its `failed()` hook runs.
    async fn after_failure(
        &self,
        decoded: &Decoded,
        ctx: &JobContext,
        settled: Settled,
        reason: String,
    ) {
        if settled == (Settled::Failed { recorded: true }) {
            let failed = FailedContext::new(
                ctx.uuid(),
                ctx.job_name(),
                ctx.queue(),
                ctx.attempt(),
                reason,
            );
            hooks::run(
                &self.settler.queue,
                &self.config,
                &self.state,
                decoded,
                failed,
            )
            .await;
        }
    }

    /// Fails a job whose payload cannot be decoded, by its reserved bytes; one of a type this
    /// worker does not link waits for a worker that does, within `--unknown-job-grace`.
    async fn fail_undecodable(
        &self,
        job: Reserved,
        undecodable: Undecodable,
        started: Instant,
    ) -> Settled {
        let span = tracing::info_span!(
            "job",
            job = "?",
            uuid = %undecodable.uuid,
            queue = %job.queue.name,
        );
        let verdict = match undecodable.unknown_since {
            Some(since) => on_unrunnable(
                undecodable.reason,
                since,
                self.config.unknown_job_grace,
                unix_seconds(),
            ),
            None => Verdict::Fail(undecodable.reason),
        };
        let id = JobId {
            uuid: &undecodable.uuid,
            job: &undecodable.job,
            attempt: 0,
            tags: &[],
            failed_hook: false,
        };
        let effects = AttemptEffects {
            holds: &Holds::default(),
            steps: SettleSteps::new(),
        };
        self.settler
            .settle(job, id, verdict, None, started.elapsed(), effects)
            .instrument(span)
            .await
    }
}

/// A reserved job, decoded, as the processor runs it.
struct Attempt<'a> {
    job: Reserved,
    /// The job's uuid, as text.
    uuid: &'a str,
    decoded: &'a Decoded,
    held: &'a Held,
    started: Instant,
}
