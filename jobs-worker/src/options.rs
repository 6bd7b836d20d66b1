//! The worker's options: Laravel's `queue:work` flags with their defaults, plus our own.

use clap::Parser;
use redjob::admin::WaitThreshold;
use redjob::Backoff;
use std::time::Duration;

use crate::config::WorkerConfig;

/// Options of `worker`, as parsed from the command line (see `docs/worker.md`).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "worker",
    about = "Runs jobs from Redis queues, following Laravel's queue:work.",
    version
)]
pub struct WorkerOptions {
    /// Queues to take jobs from, in strict priority order (comma-separated; default: the
    /// program's own default queues, else default).
    ///
    /// `None` when the command line names none: [`WorkerOptions::config`] then takes the
    /// queues [`WorkerOptions::default_queues`] gave, else `default`.
    #[arg(long, value_delimiter = ',', value_name = "QUEUES")]
    pub queue: Option<Vec<String>>,

    /// Attempts allowed per job, unless the job sets its own (0: unlimited).
    #[arg(long, default_value_t = 1)]
    pub tries: u32,

    /// Seconds to wait before retrying a failed job: one value or a list like 1,5,10.
    #[arg(long, default_value = "0")]
    pub backoff: Backoff,

    /// Old name of --backoff; the larger of the two applies, as in Laravel.
    #[arg(long, default_value = "0")]
    pub delay: Backoff,

    /// Seconds a job may run before it is stopped as timed out (0: no limit).
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,

    /// Longest an idle worker waits before checking its queues again, in seconds. An idle
    /// worker wakes at once when a job is pushed or a delayed job falls due.
    #[arg(long, default_value_t = 3.0)]
    pub sleep: f64,

    /// Seconds to pause after each job.
    #[arg(long, default_value_t = 0.0)]
    pub rest: f64,

    /// Process a single job, then exit.
    #[arg(long)]
    pub once: bool,

    /// Exit once the queues are empty, no job is running, and every finished job is
    /// acknowledged (what an acknowledgement pushes, as a batch's callbacks, runs first).
    #[arg(long)]
    pub stop_when_empty: bool,

    /// Exit after this many jobs (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_jobs: u64,

    /// Exit after this many seconds (0: no limit); running jobs finish first.
    #[arg(long, default_value_t = 0)]
    pub max_time: u64,

    /// Exit with status 12 once the process uses more than this many megabytes.
    #[arg(long, default_value_t = 128)]
    pub memory: u64,

    /// This worker's name, shown in logs.
    #[arg(long, default_value = "default")]
    pub name: String,

    /// Log one JSON object per line instead of human-readable lines.
    #[arg(long)]
    pub json: bool,

    /// Seconds a cancelled job's handler may go on after it was told before it is stopped.
    #[arg(long, default_value_t = 10.0)]
    pub cancel_grace: f64,

    /// How many jobs of one group of a queue run at once across every worker, for groups
    /// with no limit of their own or their queue's (`jobsctl groups`; default: no limit).
    #[arg(long, value_name = "N")]
    pub group_concurrency: Option<u32>,

    /// How many jobs of one group start within a period, for groups with no rate of their own
    /// or their queue's: JOBS/SECONDS, such as 10/1 (default: no limit).
    #[arg(long, value_name = "JOBS/SECONDS")]
    pub group_rate: Option<redjob::queue::GroupRate>,

    /// Seconds after which a reserved job whose worker died is handed out again.
    #[arg(long, default_value_t = 90.0)]
    pub retry_after: f64,

    /// Jobs run at once in this process.
    #[arg(long, default_value_t = 10)]
    pub concurrency: usize,

    /// Milliseconds of work to reserve ahead of busy slots while a backlog drains: as many
    /// jobs as the slots start within it, by their recent mean run time (at most three rounds
    /// of the slots). About a round trip to Redis; 0 reserves none ahead.
    #[arg(long, default_value_t = 2.0, value_name = "MS")]
    pub reserve_ahead_ms: f64,

    /// Threads the worker and its jobs run on (default: one per CPU, or
    /// $TOKIO_WORKER_THREADS). With 1, the worker and its jobs share one thread: the least
    /// CPU per job for handlers that await I/O, above all on a host shared with Redis, while
    /// a handler that computes or blocks holds up every other job until it yields.
    #[arg(long, value_name = "N")]
    pub threads: Option<std::num::NonZeroUsize>,

    /// Seconds running jobs get to finish after SIGTERM/SIGINT/SIGQUIT before they are put
    /// back on their queues (default: the --timeout; no limit with --timeout 0).
    #[arg(long)]
    pub grace: Option<f64>,

    /// Hours the per-minute job counters this worker publishes are kept in Redis.
    #[arg(long, default_value_t = redjob::admin::DEFAULT_METRICS_RETENTION.as_secs_f64() / 3600.0)]
    pub metrics_retention: f64,

    /// Serve Prometheus metrics over HTTP on this address, e.g. 127.0.0.1:9464 (default: off).
    #[arg(long)]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// How many times a job may be requeued by its middleware (a busy limit or lock) without
    /// counting an attempt; past that, a requeue counts as a release.
    #[arg(long, default_value_t = 1000)]
    pub max_requeues: u32,
    /// How many times a job may be put back by a stopping worker without counting an attempt
    /// (0: no limit); past that, the job fails.
    #[arg(long, default_value_t = 10)]
    pub max_interruptions: u32,
    /// Seconds a job this worker cannot run (a type it does not link, data it cannot decode)
    /// waits for a worker that can, its attempts given back, before it fails (0: at once).
    #[arg(long, default_value_t = 600.0)]
    pub unknown_job_grace: f64,
    /// Acknowledge a finished or failed job only once this many replicas have the
    /// acknowledgement (one WAIT per batch of them), so that a Redis failover does not run it
    /// again (default 0: the primary alone).
    #[arg(long, default_value_t = 0, value_name = "REPLICAS")]
    pub durable_acks: u32,
    /// Milliseconds a durable acknowledgement waits for its replicas; when fewer confirm,
    /// the acknowledgement stands and a warning says so.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub durable_acks_timeout: u64,
    /// A queue's wait threshold, written to Redis at start for jobsctl, the dashboard and the
    /// metrics: QUEUE=SECONDS (repeatable, or a comma list like emails=60,billing=300).
    #[arg(long = "wait", value_name = "QUEUE=SECONDS", value_delimiter = ',')]
    pub waits: Vec<WaitThreshold>,

    /// Keep the schedules this program defines: fire each tick once between every worker
    /// started with --schedule (docs/schedules.md).
    #[arg(long)]
    pub schedule: bool,

    /// Only keep the schedules, taking no jobs: a process that schedules for workers elsewhere.
    #[arg(long, conflicts_with = "schedule")]
    pub schedule_only: bool,

    /// How each job's span continues the trace it was dispatched in, for job types that do not
    /// say: child, link (a trace of its own, linked) or ignore; default: a child, linked
    /// instead for a batch's jobs and jobs started an hour after their dispatch
    /// (docs/tracing.md; the feature `otel`).
    #[arg(long, value_name = "MODE")]
    pub trace: Option<redjob::trace::TraceMode>,

    /// Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379); a Redis Cluster is
    /// redis+cluster://host:port,host:port/, a Sentinel-managed primary
    /// redis+sentinel://host:26379,host:26379/SERVICE.
    #[arg(long, env = "REDIS_URL", default_value = redjob::queue::DEFAULT_REDIS_URL)]
    pub redis: String,

    /// Prefix before every Redis key, as a Laravel app's `database.redis.options.prefix`
    /// (for example laravel_database_) when sharing its queues (default: none).
    #[arg(long, env = "REDIS_PREFIX", default_value = "")]
    pub prefix: String,
}

impl WorkerOptions {
    /// Takes jobs from `queues` unless the command line names its own with `--queue`: the
    /// default of a program whose jobs declare queues of their own (`#[job(queue = ...)]`),
    /// in place of `default`. [`Command::default_queues`](crate::Command::default_queues)
    /// does the same for a worker program.
    ///
    /// ```
    /// use redjob_worker::clap::Parser;
    /// use redjob_worker::WorkerOptions;
    ///
    /// let options = WorkerOptions::parse_from(["worker"]).default_queues(["payments", "default"]);
    /// assert_eq!(options.config().queues, ["payments", "default"]);
    ///
    /// let options = WorkerOptions::parse_from(["worker", "--queue", "high"]).default_queues(["payments"]);
    /// assert_eq!(options.config().queues, ["high"]);
    /// ```
    pub fn default_queues<Q: Into<String>>(mut self, queues: impl IntoIterator<Item = Q>) -> Self {
        if self.queue.is_none() {
            self.queue = Some(queues.into_iter().map(Into::into).collect());
        }
        self
    }

    /// The worker configuration these options describe: seconds become durations, `0`
    /// limits become `None`, and the backoff is the larger of --backoff and --delay, as in
    /// Laravel. What the watchdog does about a blocked handler is left at the default,
    /// [`OnBlocked::AbandonJob`](crate::OnBlocked::AbandonJob); the worker binary
    /// ([`Command`](crate::Command)) sets `ExitProcess`.
    pub fn config(&self) -> WorkerConfig {
        WorkerConfig {
            queues: self
                .queue
                .clone()
                .unwrap_or_else(|| vec![redjob::DEFAULT_QUEUE.to_owned()]),
            tries: self.tries,
            backoff: self.backoff.max(&self.delay),
            timeout: (self.timeout > 0).then(|| Duration::from_secs(self.timeout)),
            sleep: secs(self.sleep),
            rest: secs(self.rest),
            once: self.once,
            stop_when_empty: self.stop_when_empty,
            max_jobs: (self.max_jobs > 0).then_some(self.max_jobs),
            max_time: (self.max_time > 0).then(|| Duration::from_secs(self.max_time)),
            memory_mb: self.memory,
            name: self.name.clone(),
            retry_after: secs(self.retry_after),
            concurrency: self.concurrency,
            reserve_ahead: secs(self.reserve_ahead_ms / 1000.0),
            // Without --grace, running jobs get their timeout to finish.
            grace: match self.grace {
                Some(grace) => Some(secs(grace)),
                None => (self.timeout > 0).then(|| Duration::from_secs(self.timeout)),
            },
            metrics_retention: secs(self.metrics_retention * 3600.0),
            max_requeues: self.max_requeues,
            max_interruptions: self.max_interruptions,
            unknown_job_grace: secs(self.unknown_job_grace),
            durable_acks: redjob::Durability::replicas(self.durable_acks)
                .within(Duration::from_millis(self.durable_acks_timeout)),
            schedule: self.schedule,
            waits: self.waits.clone(),
            on_blocked: crate::config::OnBlocked::default(),
            trace: self.trace,
            cancel_grace: secs(self.cancel_grace),
            groups: redjob::queue::GroupLimits {
                concurrency: self.group_concurrency.filter(|n| *n > 0),
                rate: self.group_rate,
            },
        }
    }
}

fn secs(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_laravels() {
        let o = WorkerOptions::parse_from(["worker"]);
        assert_eq!(o.queue, None);
        assert_eq!((o.tries, o.timeout, o.memory, o.max_jobs), (1, 60, 128, 0));
        let config = o.config();
        assert_eq!(config.sleep, Duration::from_secs(3));
        assert_eq!(config.retry_after, Duration::from_secs(90));
        assert_eq!(config.grace, Some(Duration::from_secs(60)));
        assert_eq!(config, WorkerConfig::default());
    }

    #[test]
    fn backoff_is_the_larger_of_backoff_and_delay() {
        let o = WorkerOptions::parse_from([
            "worker",
            "--queue",
            "high,default",
            "--backoff",
            "1,5,10",
            "--delay",
            "3",
        ]);
        assert_eq!(o.config().queues, ["high", "default"]);
        assert_eq!(o.config().backoff.seconds(), [3, 5, 10]);
    }

    #[test]
    fn wait_thresholds_repeat_or_come_as_a_list() {
        let o = WorkerOptions::parse_from([
            "worker",
            "--wait",
            "emails=60,billing=300",
            "--wait",
            "high=5",
        ]);
        let waits: Vec<String> = o.config().waits.iter().map(|w| w.to_string()).collect();
        assert_eq!(waits, ["emails=60", "billing=300", "high=5"]);
        for bad in ["emails", "emails=0", "emails=1m", "=60"] {
            let err = WorkerOptions::try_parse_from(["worker", "--wait", bad]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
        }
    }
}
