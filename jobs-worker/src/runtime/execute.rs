//! Running a job: the attempt rules checked first, then its middleware and handler under its
//! timeout with panics caught, and what happened turned into a verdict. This is the one place
//! a job's code runs.

use futures_util::FutureExt;
use redjob::__worker::{
    AttemptEnd, AttemptHooks, AttemptSetup, Reservation, SettleSteps, StateSetup, WorkerQueue,
};
use redjob::middleware::{panic_message, Layer, Middleware, Next, Panicked};
use redjob::queue::hold::{Hold, HoldUntil, Holds};
use redjob::{JobContext, RedisQueue, Request, State, UniqueUntil};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::WorkerConfig;

use super::cancelled::CancelledBatches;
use super::cancels::CancelRequests;
use super::deadline::Deadline;
use super::decode::Decoded;
use super::lease::Held;

use super::rules::{on_unrunnable, AttemptError, Limits, Verdict};
use super::time::{sleep_for, unix_seconds};

/// Why a job the worker stopped while it ran is back on its queue.
pub(crate) const INTERRUPTED: &str = "interrupted by shutdown; back on its queue";

/// What a job runs with besides its own code: the worker's settings, its middleware
/// (outermost), and its Redis handle for the middleware that keeps state there.
pub(crate) struct Surroundings<'a> {
    pub(crate) config: &'a WorkerConfig,
    pub(crate) middleware: &'a [Layer],
    pub(crate) redis: &'a Arc<RedisQueue>,
    /// The application state its handler reads.
    pub(crate) state: &'a State,
    /// Where the attempt's holds go: the running job's entry, which the heartbeat renews.
    pub(crate) holds: Arc<Holds>,
    /// Whether the batches of the worker's jobs were cancelled (`None`: a synchronous run,
    /// which runs them whatever their batch).
    pub(crate) cancelled: Option<&'a CancelledBatches>,
    /// When the worker began processing the job: a cancellation read before is too old.
    pub(crate) started: std::time::Instant,
    /// The jobs asked to stop (`None`: a synchronous run, which no request reaches).
    pub(crate) cancels: Option<&'a CancelRequests>,
    /// This worker, as a job's status names it.
    pub(crate) worker: &'a str,
    /// Cancelled when the worker is asked to stop (`None`: a synchronous run, which nothing
    /// stops).
    pub(crate) stopping: Option<&'a CancellationToken>,
    /// The reservation a resumable job runs under, which its checkpoints are saved with
    /// (`None`: a job that keeps none, or a synchronous run).
    pub(crate) reservation: Option<Reservation>,
    /// The checkpoint the attempt starts from, as a synchronous run given one does (a worker's
    /// resumable jobs read theirs from Redis).
    pub(crate) resume_from: Option<String>,
}

/// Checks the attempts, decodes the job taken from `queue` and runs it through its middleware:
/// the verdict, with the attempt's error if it failed, and the context whose holds the
/// settling frees. A worker's job is `held` in its registry of running jobs, whose watchdog
/// sees a handler that blocks its thread; a synchronous run has none.
///
/// A failure the attempt decided without an error of the handler's (`ctx.fail`, too many
/// attempts, data that does not decode, ...) is recorded on the attempt's span here; the
/// handler's own errors are recorded by [`verdict`], which knows their kind.
pub(crate) async fn run(
    around: Surroundings<'_>,
    decoded: &Decoded,
    queue: &str,
    held: Option<&Held>,
    interrupt: CancellationToken,
) -> (Verdict, Option<String>, AttemptHooks) {
    let (verdict, error, attempt) = decide(around, decoded, queue, held, interrupt).await;
    if let (Verdict::Fail(reason), None) = (&verdict, &error) {
        record_failure("failed", reason);
    }
    (verdict, error, attempt)
}

/// The steps the capabilities a job belongs to take when its attempt settles with `verdict`:
/// done, failed, or released (for the attempt's `error` if it had one). A job that is done but
/// cannot be settled as done (a link it added cannot be pushed) fails, for that reason.
pub(crate) fn settle_steps(
    attempt: &AttemptHooks,
    queue: &RedisQueue,
    verdict: Verdict,
    error: Option<&str>,
) -> (Verdict, SettleSteps) {
    let end = match &verdict {
        Verdict::Done | Verdict::Skip => AttemptEnd::Done,
        Verdict::Fail(reason) => AttemptEnd::Failed(reason),
        Verdict::Interrupt => AttemptEnd::Interrupted(INTERRUPTED),
        Verdict::Unrunnable(reason) => AttemptEnd::Released(reason),
        Verdict::Release(_) | Verdict::Retry(_) | Verdict::Requeue(_) => {
            AttemptEnd::Released(error.unwrap_or("released by the job"))
        }
    };
    match attempt.settle_steps(queue, end) {
        Ok(steps) => (verdict, steps),
        Err((reason, steps)) => (Verdict::Fail(reason), steps),
    }
}

/// [`run`]'s attempt: the verdict, the handler's error if it failed, and the attempt's hooks,
/// with its context.
async fn decide(
    around: Surroundings<'_>,
    decoded: &Decoded,
    queue: &str,
    held: Option<&Held>,
    interrupt: CancellationToken,
) -> (Verdict, Option<String>, AttemptHooks) {
    let payload = &decoded.payload;
    let limits = limits(around.config, decoded);
    let mut ctx = JobContext::new(payload.uuid, &payload.job, queue, payload.attempts)
        .resuming_from(around.resume_from);
    if let Some(reservation) = around.reservation {
        ctx = ctx.with_reservation(reservation);
    }
    let attempt = AttemptHooks::start(
        payload,
        Arc::new(
            ctx.with_redis(around.redis.clone(), around.config.retry_after)
                .with_holds(around.holds)
                .with_state(around.state, decoded.registration.state())
                .with_log_context(payload.log_context.clone().unwrap_or_default())
                .with_workflows(payload.workflow_ids())
                .with_stopping(around.stopping.cloned().unwrap_or_default()),
        ),
    );
    let ctx = attempt.context();
    let unique_lock = payload.unique.as_ref().map(|unique| {
        let hold = Hold {
            key: around.redis.keys().unique(queue, &unique.key),
            owner: payload.uuid.to_string(),
        };
        ctx.holds().add(hold.clone(), HoldUntil::Job);
        (hold, unique.until)
    });
    if around
        .cancels
        .is_some_and(|cancels| cancels.requested(&payload.uuid))
    {
        info!(status = "CANCELLED", "cancelled before it ran");
        ctx.cancellation().cancel();
        return (
            Verdict::Fail(redjob::status::CANCELLED.to_owned()),
            None,
            attempt,
        );
    }
    let now = unix_seconds();
    if let Some(verdict) = limits.check_before_run(&payload.display_name, payload.attempts, now) {
        return (verdict, None, attempt);
    }
    if let (Some(batch), Some(cancelled)) = (payload.batch, around.cancelled) {
        let answer = match cancelled.known(batch, around.started) {
            Some(known) => Ok(known),
            // Boxed: rare (a read per batch every `FRESH`), and jobs of no batch carry none of
            // this state in their attempt's future.
            None => Box::pin(cancelled.cancelled(around.redis, batch, around.started)).await,
        };
        match answer {
            Ok(true) => {
                info!(status = "SKIPPED", batch = %batch, "its batch was cancelled");
                return (Verdict::Skip, None, attempt);
            }
            Ok(false) => {}
            // Run it later rather than run a job of a batch that may be cancelled.
            Err(err) => {
                let reason = format!("cannot read whether its batch was cancelled: {err}");
                return (
                    Verdict::Requeue(Duration::from_secs(1)),
                    Some(reason),
                    attempt,
                );
            }
        }
    }
    let through = match named_middleware(&payload.through) {
        Ok(through) => through,
        Err(reason) => return (Verdict::Fail(reason), None, attempt),
    };
    let (verdict, error) = match decoded.registration.start(decoded.data(), ctx.clone()) {
        Ok(started) => {
            attempt.started(around.redis, around.worker).await;
            info!(status = "RUNNING", "RUNNING");
            let free_before_handler = match unique_lock {
                Some((hold, UniqueUntil::Processing)) => Some(FreeUniqueLock(hold).into()),
                _ => None,
            };
            let chain: Vec<Layer> = match (&free_before_handler, through.is_empty()) {
                // Most jobs have no middleware: build nothing for them.
                (None, true) if around.middleware.is_empty() => started.middleware,
                _ => around
                    .middleware
                    .iter()
                    .cloned()
                    .chain(started.middleware)
                    .chain(through)
                    .chain(free_before_handler)
                    .collect(),
            };
            let handler = Next::new(&chain, started.handler).run(ctx);
            let display_name = &payload.display_name;
            let grace = around.config.cancel_grace;
            execute(
                handler,
                &attempt,
                &limits,
                display_name,
                held,
                interrupt,
                grace,
            )
            .await
        }
        Err(err) => {
            // Perhaps written by a newer version of the job: a worker that runs that version
            // may decode it.
            let reason = format!("cannot decode the data of job {}: {err}", payload.job);
            let grace = around.config.unknown_job_grace;
            let since = payload.unrunnable_since;
            (on_unrunnable(reason, since, grace, unix_seconds()), None)
        }
    };
    (verdict, error, attempt)
}

/// Runs the attempt (middleware and handler) under its timeout, catching panics, and turns
/// what happened into a verdict, with the attempt's error if it failed.
async fn execute(
    handler: impl std::future::Future<Output = redjob::JobResult> + Send,
    attempt: &AttemptHooks,
    limits: &Limits,
    display_name: &str,
    held: Option<&Held>,
    interrupt: CancellationToken,
    cancel_grace: Duration,
) -> (Verdict, Option<String>) {
    // The attempt runs inside this task: a panic is caught where it happens, and stopping
    // it (timeout, cancel, shutdown) drops its future at its next `.await`. A handler that
    // blocks its thread never reaches an `.await`; the watchdog sees its deadline.
    let ctx = attempt.context();
    let handler = AssertUnwindSafe(handler).catch_unwind();
    let watched = held.map(|held| {
        held.watch(Deadline::new(
            limits.timeout,
            attempt.clone(),
            limits.clone(),
            display_name,
        ))
    });
    let timeout = sleep_for(limits.timeout);
    let stopped = async {
        ctx.cancelled().await;
        tokio::time::sleep(cancel_grace).await;
    };
    let result = tokio::select! {
        finished = handler => Some(match finished {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(match err.inner().downcast_ref::<Panicked>() {
                Some(Panicked(message)) => AttemptError::Panic(message.clone()),
                None => AttemptError::Error(err.to_string()),
            }),
            Err(panic) => Err(AttemptError::Panic(panic_message(&*panic))),
        }),
        _ = timeout => Some(Err(AttemptError::Timeout)),
        _ = stopped => Some(Err(AttemptError::Error(format!(
            "stopped: still running {cancel_grace:?} after it was cancelled"
        )))),
        _ = interrupt.cancelled() => None,
    };
    // A job the watchdog took over meanwhile is its to settle: the processor asks the lease.
    drop(watched);
    match result {
        Some(result) => verdict(ctx, limits, display_name, result),
        None => {
            let verdict = limits.on_interrupt(display_name);
            let error = (verdict == Verdict::Interrupt).then(|| INTERRUPTED.to_owned());
            (verdict, error)
        }
    }
}

/// The middleware a dispatch asked for by name, or why the job cannot run.
fn named_middleware(names: &[String]) -> Result<Vec<Layer>, String> {
    names
        .iter()
        .map(|name| {
            redjob::middleware::find(name).ok_or_else(|| {
                format!(
                    "middleware {name:?} is not defined in this worker: define it at startup \
                     with redjob::middleware::define"
                )
            })
        })
        .collect()
}

/// Frees a job's unique lock just before its handler runs, once every other middleware let it
/// through: the lock of a job unique until processing.
struct FreeUniqueLock(Hold);

#[redjob::async_trait]
impl Middleware for FreeUniqueLock {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> redjob::JobResult {
        if let Some(redis) = ctx.redis() {
            WorkerQueue::of(redis)
                .free_holds(std::slice::from_ref(&self.0))
                .await?;
        }
        ctx.holds().remove(&self.0.key);
        next.run(ctx).await
    }
}

/// The job's own options, else the worker's.
fn limits(config: &WorkerConfig, decoded: &Decoded) -> Limits {
    let payload = &decoded.payload;
    let timeout = match payload.timeout {
        Some(seconds) => (seconds > 0).then(|| Duration::from_secs(seconds)),
        None => config.timeout,
    };
    Limits {
        max_tries: payload.max_tries.unwrap_or(config.tries),
        backoff: payload.backoff().unwrap_or_else(|| config.backoff.clone()),
        timeout,
        fail_on_timeout: payload.fail_on_timeout,
        may_requeue: payload.requeues < config.max_requeues,
        retry_until: payload.retry_until,
        max_exceptions: payload.max_exceptions,
        exceptions: payload.exceptions,
        interruptions: (payload.interruptions, config.max_interruptions),
    }
}

/// The span every line about one attempt of a job is logged in. With an OpenTelemetry layer
/// (feature `otel`), [`attempt_span`] names it and ties it to its dispatch's trace.
pub(crate) fn job_span(display_name: &str, uuid: &str, queue: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!(
        "job",
        job = %display_name,
        uuid = %uuid,
        queue = %queue,
        attempt,
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
    )
}

/// The span of an attempt of `decoded`, whose uuid is `uuid`, taken from `queue`, continuing
/// the trace its payload carries as the job type's or the worker's trace mode says.
pub(crate) fn attempt_span(
    config: &WorkerConfig,
    decoded: &Decoded,
    uuid: &str,
    queue: &str,
) -> tracing::Span {
    let payload = &decoded.payload;
    let span = job_span(&payload.display_name, uuid, queue, payload.attempts);
    let mode = || {
        let job = decoded.registration.options().trace;
        redjob::trace::mode_for(job, config.trace, payload, unix_seconds())
    };
    redjob::__worker::trace::continue_trace(&span, payload, queue, mode);
    span
}

/// Records on the attempt's span that it failed, as `kind` (`error`, `panic`, `timeout`,
/// `failed`), for an OpenTelemetry exporter to show.
fn record_failure(kind: &'static str, message: &str) {
    redjob::__worker::trace::record_error(&tracing::Span::current(), kind, message);
}

/// The verdict on an attempt that ended with `result`, with the attempt's error if it failed.
/// A release or failure the handler asked for through its context wins.
pub(crate) fn verdict(
    ctx: &JobContext,
    limits: &Limits,
    display_name: &str,
    result: Result<(), AttemptError>,
) -> (Verdict, Option<String>) {
    let error = result.as_ref().err().map(|e| e.describe(display_name));
    if let (Err(failed), Some(message)) = (&result, &error) {
        record_failure(failed.kind(), message);
    }
    // However the handler ended, once the worker told it of a cancel: not retried.
    if ctx.is_cancelled() {
        return (Verdict::Fail(redjob::status::CANCELLED.to_owned()), error);
    }
    let verdict = match (ctx.take_request(), result) {
        (Some(Request::Release(delay)), _) => Verdict::Release(delay),
        (Some(Request::Requeue(delay)), _) if limits.may_requeue => Verdict::Requeue(delay),
        (Some(Request::Requeue(delay)), _) => Verdict::Release(delay),
        (Some(Request::Skip), _) => Verdict::Skip,
        (Some(Request::Fail(message)), _) => Verdict::Fail(message),
        (Some(Request::Interrupt), _) => limits.on_interrupt(display_name),
        (Some(_) | None, Ok(())) => Verdict::Done,
        (Some(_) | None, Err(error)) => {
            let now = unix_seconds();
            limits.after_error(display_name, ctx.attempt(), &error, now)
        }
    };
    (verdict, error)
}
