//! The processor: everything that happens to one reserved job, from decoding its payload to
//! settling it in Redis.
//!
//! `Processor::process` is the single path every job takes:
//! decode -> check attempts -> `Processor::execute` the handler -> verdict -> settle.
//! Job middleware and lifecycle events hook in around `execute`.

use futures_util::FutureExt;
use jobs_core::keys::QueueKeys;
use jobs_core::payload::RawFields;
use jobs_core::registry::{self, JobFuture, JobRegistration};
use jobs_core::telemetry::Outcome;
use jobs_core::{Backoff, FailedJob, JobContext, Payload, RedisQueue, Request, SigningKey};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn, Instrument};

use crate::acker::AckSender;
use crate::control::{Attempt, Control};
use crate::heartbeat::{Held, Running};
use crate::options::WorkerOptions;
use crate::retry::with_retries;
use crate::rules::{AttemptError, Limits, Verdict};
use crate::stats::Stats;
use crate::watchdog::Deadline;
use crate::worker::sleep_for;

/// A job taken from a queue: the queue and the reserved copy, byte for byte.
#[derive(Debug, Clone)]
pub struct Reserved {
    /// The queue it came from.
    pub queue: Arc<QueueKeys>,
    /// The reserved copy as the pop script returned it (for a payload that is not UTF-8, a
    /// lossy rendering of it, for logs and the failed-job record).
    pub raw: String,
    /// The exact bytes of a reserved payload that is not UTF-8; such a job can only fail.
    pub unreadable: Option<Vec<u8>>,
}

impl Reserved {
    /// The reserved copies of `jobs`, grouped by queue, for one Redis call per queue.
    pub fn by_queue(jobs: &[Reserved]) -> Vec<(&QueueKeys, Vec<&str>)> {
        let mut groups: Vec<(&QueueKeys, Vec<&str>)> = Vec::new();
        for job in jobs {
            match groups
                .iter_mut()
                .find(|(keys, _)| keys.name == job.queue.name)
            {
                Some((_, members)) => members.push(&job.raw),
                None => groups.push((&job.queue, vec![&job.raw])),
            }
        }
        groups
    }
}

/// A payload that decoded, with the job type that runs it.
struct Decoded {
    payload: Payload,
    registration: &'static JobRegistration,
}

/// Which job an attempt settles: the failed-job record's uuid, and the metrics' job name and
/// attempt.
#[derive(Clone, Copy)]
pub(crate) struct JobId<'a> {
    /// The job's uuid.
    pub(crate) uuid: &'a str,
    /// The payload's job name, or `?`.
    pub(crate) job: &'a str,
    /// The payload's attempts number (0 when it did not decode).
    pub(crate) attempt: u32,
}

/// Why a reserved payload cannot run at all.
struct Undecodable {
    uuid: String,
    /// The payload's job name, or `?`.
    job: String,
    reason: String,
}

impl Undecodable {
    /// A payload whose uuid and job are unknown: its failed-job record gets a new uuid.
    fn new(reason: impl Into<String>) -> Self {
        Undecodable {
            uuid: uuid::Uuid::new_v4().to_string(),
            job: "?".to_owned(),
            reason: reason.into(),
        }
    }
}

/// What the processor did with a job, for the worker's bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The handler finished.
    Done,
    /// The job was put back to run later (released, retried, or interrupted by shutdown).
    Released,
    /// The job went to the failed-job store.
    Failed,
}

/// Runs jobs and settles them.
#[derive(Clone)]
pub struct Processor {
    queue: RedisQueue,
    acks: AckSender,
    running: Arc<Running>,
    options: Arc<WorkerOptions>,
    stats: Arc<Stats>,
    control: Arc<Control>,
    /// The backoff of jobs that set none, worked out once from the options.
    default_backoff: Backoff,
}

impl Processor {
    /// A processor writing through `queue`, acknowledging finished jobs through `acks` and
    /// keeping the jobs it runs in `running` (whose reservations the heartbeat extends), with
    /// the worker's options, counting attempts in `stats` and, per minute, in `control`.
    pub fn new(
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
    pub async fn process(&self, job: Reserved, interrupt: CancellationToken) -> Settled {
        let started = Instant::now();
        let held = self.running.hold(&job);
        let _counted = crate::prometheus::running_job();
        let decoded = self.decode(&job);
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

    /// The payload and the job type that runs it, or why the job cannot run at all. A payload
    /// over the size limit is failed without being parsed; with a signing key, a payload
    /// without a valid signature is failed before its job type is looked up.
    fn decode(&self, job: &Reserved) -> Result<Decoded, Undecodable> {
        let config = self.queue.config();
        let size = job.unreadable.as_ref().map_or(job.raw.len(), Vec::len);
        if size > config.max_payload_bytes {
            return Err(Undecodable::new(format!(
                "payload too large: {size} bytes, over the limit of {} bytes; not decoded",
                config.max_payload_bytes
            )));
        }
        if job.unreadable.is_some() {
            return Err(Undecodable::new("malformed payload: not valid UTF-8"));
        }
        decode(&job.raw, config.signing_key.as_ref())
    }

    /// Checks the attempts, decodes the job and runs it: the verdict, with the attempt's error
    /// if it failed.
    async fn run(
        &self,
        decoded: &Decoded,
        job: &Reserved,
        held: &Held,
        interrupt: CancellationToken,
    ) -> (Verdict, Option<String>) {
        let payload = &decoded.payload;
        let limits = self.limits(decoded);
        if let Some(verdict) = limits.check_before_run(&payload.display_name, payload.attempts) {
            return (verdict, None);
        }
        let ctx = Arc::new(JobContext::new(
            payload.uuid,
            &payload.job,
            &job.queue.name,
            payload.attempts,
        ));
        match decoded.registration.start(&payload.data, ctx.clone()) {
            Ok(handler) => {
                info!(status = "RUNNING", "RUNNING");
                let display_name = &payload.display_name;
                self.execute(handler, &ctx, &limits, display_name, held, interrupt)
                    .await
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
        &self,
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

    /// The job's own options, else the worker's.
    fn limits(&self, decoded: &Decoded) -> Limits {
        let payload = &decoded.payload;
        let timeout = payload.timeout.unwrap_or(self.options.timeout);
        Limits {
            max_tries: payload.max_tries.unwrap_or(self.options.tries),
            backoff: payload
                .backoff()
                .unwrap_or_else(|| self.default_backoff.clone()),
            timeout: (timeout > 0).then(|| Duration::from_secs(timeout)),
            fail_on_timeout: payload.fail_on_timeout,
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
        let held = with_retries(self.options.retry_after(), what, || op(&self.queue)).await;
        if held == Some(false) {
            warn!(queue = %job.queue.name, "the reservation was no longer held; nothing changed");
        }
    }
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

/// The span every line about one attempt of a job is logged in.
pub(crate) fn job_span(display_name: &str, uuid: &str, queue: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!("job", job = %display_name, uuid = %uuid, queue = %queue, attempt)
}

fn decode(raw: &str, signing_key: Option<&SigningKey>) -> Result<Decoded, Undecodable> {
    let payload = Payload::from_json(raw).map_err(|err| {
        let fields = RawFields::parse(raw);
        let uuid = fields
            .text("uuid")
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let job = fields.text("job").unwrap_or_else(|| "?".to_owned());
        let reason = if fields.is_json() {
            format!("malformed payload: not a job payload ({err})")
        } else {
            format!("malformed payload: not valid JSON ({err})")
        };
        Undecodable { uuid, job, reason }
    })?;
    if let Some(key) = signing_key {
        key.verify(&payload).map_err(|mismatch| Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job.clone(),
            reason: mismatch.to_string(),
        })?;
    }
    if payload.attempts == 0 {
        return Err(Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job,
            reason: "malformed payload: its attempts could not be counted at reservation".into(),
        });
    }
    match registry::find(&payload.job) {
        Some(registration) => Ok(Decoded {
            payload,
            registration,
        }),
        None => Err(Undecodable {
            uuid: payload.uuid.to_string(),
            job: payload.job.clone(),
            reason: format!(
                "unknown job type {:?}: no #[job] with that name is linked into this worker",
                payload.job
            ),
        }),
    }
}

/// The message a panic carries (`panic!` with a literal or a formatted string).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-text payload".to_owned())
}
