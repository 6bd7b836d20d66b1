//! The worker's configuration, typed: what the command line's [`WorkerOptions`] convert into,
//! and what a program that runs a [`Worker`](crate::Worker) itself builds.
//!
//! [`WorkerOptions`]: crate::WorkerOptions

use redjob::queue::GroupLimits;
use redjob::Backoff;
use std::time::Duration;

/// How a worker takes, runs and settles jobs, and when it stops.
///
/// [`WorkerConfig::default`] holds Laravel's `queue:work` defaults and reads no environment
/// variable. Build one field by field, or from the command line with
/// [`WorkerOptions::config`](crate::WorkerOptions::config).
///
/// ```
/// use std::time::Duration;
/// let config = redjob_worker::WorkerConfig {
///     queues: vec!["high".into(), "default".into()],
///     tries: 3,
///     timeout: Some(Duration::from_secs(30)),
///     ..Default::default()
/// };
/// assert_eq!(config.retry_after, Duration::from_secs(90));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// Queues to take jobs from, in strict priority order.
    pub queues: Vec<String>,
    /// Attempts allowed per job, unless the job sets its own (0: unlimited).
    pub tries: u32,
    /// The backoff of jobs that set none.
    pub backoff: Backoff,
    /// How long a job may run before it is stopped as timed out, unless it sets its own
    /// (`None`: no limit).
    pub timeout: Option<Duration>,
    /// Longest an idle worker waits before checking its queues again; it wakes at once when a
    /// job is pushed or a delayed job falls due.
    pub sleep: Duration,
    /// Pause after each job, in its slot.
    pub rest: Duration,
    /// Process a single job, then stop.
    pub once: bool,
    /// Stop once the queues are empty, no job is running, and every finished job is
    /// acknowledged (what an acknowledgement pushes, as a batch's callbacks, runs first).
    pub stop_when_empty: bool,
    /// Stop after this many jobs.
    pub max_jobs: Option<u64>,
    /// Stop after this long; running jobs finish first.
    pub max_time: Option<Duration>,
    /// Stop (exit status 12) once the process uses more than this many megabytes.
    pub memory_mb: u64,
    /// This worker's name, in logs and in its heartbeat record.
    pub name: String,
    /// How long a reservation lasts: a job whose worker died is handed out again after this.
    pub retry_after: Duration,
    /// Jobs run at once.
    pub concurrency: usize,
    /// While a backlog drains and every slot is busy, the worker reserves as many jobs ahead
    /// of its slots as they start within this long, by the recent attempts' mean run time (at
    /// most three rounds of the slots), so that Redis hands out the next jobs while these run.
    /// Another worker may sit idle while jobs wait here: keep it to about a round trip to
    /// Redis, and raise it with a Redis farther away. Zero reserves none ahead.
    pub reserve_ahead: Duration,
    /// How long running jobs may finish after a stop is requested before they are put back on
    /// their queues (`None`: no limit).
    pub grace: Option<Duration>,
    /// How long the per-minute job counters this worker publishes are kept in Redis.
    pub metrics_retention: Duration,
    /// How many times a job may be requeued without counting an attempt (a middleware found
    /// its limit or lock busy); past that, a requeue counts as a release, so that a job
    /// cannot come back forever.
    pub max_requeues: u32,
    /// How many times a job may be put back by a stopping worker, its attempt given back
    /// (0: no limit); past that, the job fails, so that a job interrupted on every deploy
    /// cannot come back forever unseen.
    pub max_interruptions: u32,
    /// How long a job this worker cannot run (a type it does not link, data it cannot decode)
    /// waits for a worker that can, from when a worker first met it, its attempts given back;
    /// after that it fails. Zero: it fails at once. A rolling deploy's new job types wait for
    /// the new workers this way instead of failing on the old ones.
    pub unknown_job_grace: Duration,
    /// How many replicas must have a finished or failed job's acknowledgement before it counts
    /// as made (`--durable-acks`; default [`Durability::NONE`](redjob::Durability::NONE): the
    /// primary alone). With replicas, a failover does not run again the jobs that had finished,
    /// at the cost of a `WAIT` per acknowledgement batch (docs/scaling.md).
    pub durable_acks: redjob::Durability,
    /// Keep the schedules defined in this process ([`redjob::schedule::define`]): fire each
    /// tick once between every worker that keeps them.
    pub schedule: bool,
    /// Wait thresholds to write to Redis when the worker starts (`--wait`), for `jobsctl`, the
    /// dashboard and the metrics; a queue given twice keeps its last. Empty: none written.
    pub waits: Vec<redjob::admin::WaitThreshold>,
    /// What the watchdog does about a handler that blocks its thread past its timeout, once
    /// it has applied the timeout rules to its job.
    pub on_blocked: OnBlocked,
    /// How each attempt's span continues the trace its job was dispatched in, for job types
    /// that do not say (`#[job(trace = ...)]`); `None`: as
    /// [`redjob::trace::mode_for`] says (a child, but linked for a batch's jobs and for jobs
    /// started an hour or more after their dispatch). Needs the feature `otel` to matter.
    pub trace: Option<redjob::trace::TraceMode>,
    /// How long a cancelled job's handler may go on after its [`cancelled`] future fired
    /// before the worker stops it at its next `.await` (a handler that blocks its thread is
    /// left to the watchdog, as past a timeout). Either way its outcome is "cancelled".
    ///
    /// [`cancelled`]: redjob::JobContext::cancelled
    pub cancel_grace: Duration,
    /// The limits of a queue's groups that have none of their own and whose queue has none
    /// (set with `jobsctl groups`; docs/groups.md): how many of a group's jobs run at once
    /// across every worker, and how many start within a period. Workers of one queue should
    /// agree on them, as each applies its own when it serves a group.
    pub groups: GroupLimits,
}

/// What the watchdog does about a handler that blocks its thread past its timeout (a long
/// computation, `std::thread::sleep`, blocking I/O), which no timeout can interrupt. Either
/// way the timeout rules apply to its job first: on its last attempt it fails, otherwise it
/// comes back after `retry_after` with the attempt counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnBlocked {
    /// Leave the handler its thread and go on: its slot stays taken until the handler
    /// returns, and what it returns is ignored. The default of a [`WorkerConfig`]: a worker
    /// embedded in a service does not end the service.
    #[default]
    AbandonJob,
    /// Put the other running jobs back and end the process with status
    /// [`WATCHDOG_EXIT_CODE`](crate::WATCHDOG_EXIT_CODE), as Laravel's worker does, for a
    /// supervisor to start a fresh one. The worker binary's choice.
    ExitProcess,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            queues: vec![redjob::DEFAULT_QUEUE.to_owned()],
            tries: 1,
            // No wait between attempts, as `--backoff 0`.
            backoff: Backoff::new([0]),
            timeout: Some(Duration::from_secs(60)),
            sleep: Duration::from_secs(3),
            rest: Duration::ZERO,
            once: false,
            stop_when_empty: false,
            max_jobs: None,
            max_time: None,
            memory_mb: 128,
            name: "default".to_owned(),
            retry_after: Duration::from_secs(90),
            concurrency: 10,
            reserve_ahead: Duration::from_millis(2),
            grace: Some(Duration::from_secs(60)),
            metrics_retention: redjob::admin::DEFAULT_METRICS_RETENTION,
            max_requeues: 1000,
            max_interruptions: 10,
            unknown_job_grace: Duration::from_secs(600),
            durable_acks: redjob::Durability::NONE,
            schedule: false,
            waits: Vec::new(),
            on_blocked: OnBlocked::default(),
            trace: None,
            cancel_grace: Duration::from_secs(10),
            groups: GroupLimits::default(),
        }
    }
}

impl WorkerConfig {
    /// The most jobs this worker takes before it stops (`u64::MAX`: no limit).
    pub(crate) fn job_limit(&self) -> u64 {
        if self.once {
            1
        } else {
            self.max_jobs.unwrap_or(u64::MAX)
        }
    }
}
