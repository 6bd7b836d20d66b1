//! Running a job's handler: the attempt rules checked first, then the handler under its
//! timeout with panics caught, and what happened turned into a verdict. This is the one place
//! a job's code runs: job middleware and lifecycle events hook in here.

use futures_util::FutureExt;
use jobs_core::job::registry::JobFuture;
use jobs_core::{JobContext, Request};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::WorkerConfig;

use super::deadline::Deadline;
use super::decode::Decoded;
use super::lease::Held;

use super::reserved::Reserved;
use super::rules::{AttemptError, Limits, Verdict};
use super::time::sleep_for;

/// Checks the attempts, decodes the job and runs it: the verdict, with the attempt's error
/// if it failed.
pub(crate) async fn run(
    config: &WorkerConfig,
    decoded: &Decoded,
    job: &Reserved,
    held: &Held,
    interrupt: CancellationToken,
) -> (Verdict, Option<String>) {
    let payload = &decoded.payload;
    let limits = limits(config, decoded);
    if let Some(verdict) = limits.check_before_run(&payload.display_name, payload.attempts) {
        return (verdict, None);
    }
    let ctx = Arc::new(JobContext::new(
        payload.uuid,
        &payload.job,
        &job.queue.name,
        payload.attempts,
    ));
    match decoded.registration.start(decoded.data(), ctx.clone()) {
        Ok(handler) => {
            info!(status = "RUNNING", "RUNNING");
            let display_name = &payload.display_name;
            execute(handler, &ctx, &limits, display_name, held, interrupt).await
        }
        Err(err) => {
            let reason = format!("cannot decode the data of job {}: {err}", payload.job);
            (Verdict::Fail(reason), None)
        }
    }
}

/// Runs the handler under its timeout, catching panics, and turns what happened into a
/// verdict, with the attempt's error if it failed. This is the one place a job's code
/// runs: job middleware and lifecycle events hook in here.
async fn execute(
    handler: JobFuture,
    ctx: &Arc<JobContext>,
    limits: &Limits,
    display_name: &str,
    held: &Held,
    interrupt: CancellationToken,
) -> (Verdict, Option<String>) {
    // The handler runs inside this task: a panic is caught where it happens, and stopping
    // the handler (timeout, shutdown) drops its future at its next `.await`. A handler
    // that blocks its thread never reaches an `.await`; the watchdog sees its deadline.
    let handler = AssertUnwindSafe(handler).catch_unwind();
    let watched = limits.timeout.map(|timeout| {
        held.watch(Deadline::new(
            timeout,
            ctx.clone(),
            limits.clone(),
            display_name,
        ))
    });
    let timeout = sleep_for(limits.timeout);
    let result = tokio::select! {
        finished = handler => Some(match finished {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(AttemptError::Error(err.to_string())),
            Err(panic) => Err(AttemptError::Panic(panic_message(&*panic))),
        }),
        _ = timeout => Some(Err(AttemptError::Timeout)),
        _ = interrupt.cancelled() => None,
    };
    if watched.is_some_and(|watched| !watched.end()) {
        // The watchdog settles this job and is ending the process: settling it here as
        // well would settle it twice.
        return std::future::pending().await;
    }
    match result {
        Some(result) => verdict(ctx, limits, display_name, result),
        None => {
            let reason = "interrupted by shutdown; back on its queue".to_owned();
            (Verdict::Release(Duration::ZERO), Some(reason))
        }
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
    }
}

/// The span every line about one attempt of a job is logged in.
pub(crate) fn job_span(display_name: &str, uuid: &str, queue: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!("job", job = %display_name, uuid = %uuid, queue = %queue, attempt)
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
    let verdict = match (ctx.take_request(), result) {
        (Some(Request::Release(delay)), _) => Verdict::Release(delay),
        (Some(Request::Fail(message)), _) => Verdict::Fail(message),
        (None, Ok(())) => Verdict::Done,
        (None, Err(error)) => limits.after_error(display_name, ctx.attempt(), &error),
    };
    (verdict, error)
}

/// The message a panic carries (`panic!` with a literal or a formatted string).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-text payload".to_owned())
}
