//! The `jobsctl` command line: global options, commands and their arguments.

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use redjob::admin::AttemptOutcome;
use redjob::admin::{BatchState, FailedFilter, Section};

use super::time::parse_time;

/// The `jobsctl` command line.
#[derive(Debug, Parser)]
#[command(
    name = "jobsctl",
    about = "Operate the Redis queues: failed jobs, queue sizes and contents, pause, restart, workers.",
    version
)]
pub(super) struct Cli {
    /// Redis URL, as the worker's.
    #[arg(long, global = true, env = "REDIS_URL", default_value = redjob::queue::DEFAULT_REDIS_URL)]
    pub redis: String,

    /// Prefix before every Redis key, as the workers' --prefix.
    #[arg(long, global = true, env = "REDIS_PREFIX", default_value = "")]
    pub prefix: String,

    /// Print one JSON document instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands of `jobsctl`.
#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// List failed jobs, newest first, or show one (`jobsctl failed show UUID`).
    Failed(FailedArgs),
    /// Push failed jobs back onto their queues with attempts reset to 0, and remove their
    /// records: `all`, uuids, `--queue Q` or `--range A-B` (positions as `jobsctl failed` shows).
    Retry(RetryArgs),
    /// Delete failed-job records: uuids, or every job a filter matches.
    Forget(ForgetArgs),
    /// Delete every failed job, or only those older than --hours.
    Flush {
        /// Only those that failed more than this many hours ago.
        #[arg(long)]
        hours: Option<f64>,
    },
    /// Delete the failed jobs older than --hours.
    PruneFailed {
        /// Delete those that failed more than this many hours ago.
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
    },
    /// Sizes of queues: ready, delayed, reserved, the oldest ready job's age, paused (default:
    /// every queue Redis knows of).
    Size {
        /// Queue names.
        #[arg(value_parser = queue_name)]
        queues: Vec<String>,
    },
    /// Delete every job of a queue (ready, delayed and reserved). Asks first unless --force.
    Clear {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Do not ask.
        #[arg(long)]
        force: bool,
    },
    /// Check queue sizes against --max and waits against their thresholds (`jobsctl waits`),
    /// for cron and alerting: exit status 1 when a queue has more jobs than --max or has
    /// waited longer than its threshold.
    Monitor {
        /// Queue names.
        #[arg(required = true, value_parser = queue_name)]
        queues: Vec<String>,
        /// The most jobs (ready + delayed + reserved) a queue may hold (default: sizes are not
        /// checked).
        #[arg(long)]
        max: Option<u64>,
    },
    /// The job types some worker met and could not run lately (a type it does not link,
    /// data it cannot decode): since when, and how many live workers link them. Their jobs
    /// wait for such a worker until --unknown-job-grace, then fail.
    Unrunnable,
    /// List the queues' wait thresholds with their current waits, or set or clear one
    /// (`jobsctl waits set emails 60`).
    Waits {
        /// Set or clear instead of listing.
        #[command(subcommand)]
        command: Option<WaitsCommand>,
    },
    /// The outbox tables their live relays serve: rows waiting, rows kept, how far behind the
    /// relays are, and each relay; with --database (feature `postgres`), the table measured
    /// now. `jobsctl outbox schema` prints the SQL that creates the table.
    Outbox(OutboxArgs),
    /// Show the jobs of a queue: job, uuid, attempts, due or expiry time.
    Inspect {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Only this section: ready, delayed or reserved (default: all three).
        section: Option<Section>,
        /// At most this many jobs per section.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Show the attempts workers finished last on a queue, newest first.
    Recent {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only jobs with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Only jobs of this type (the payload's job).
        #[arg(long)]
        job: Option<String>,
        /// Only attempts that ended so: done, released or failed.
        #[arg(long)]
        outcome: Option<AttemptOutcome>,
        /// Go on after this cursor: the one a listing printed for its next page.
        #[arg(long)]
        after: Option<String>,
    },
    /// Ask every worker to exit (status 0) once its running jobs are done, for deploys.
    Restart,
    /// Make workers skip a queue until it is resumed.
    Pause {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
    },
    /// Let workers take jobs from a paused queue again.
    Resume {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
    },
    /// List the paused queues.
    Paused,
    /// List the live workers.
    Workers,
    /// A job's status: queued, delayed, running (with its progress and worker), released,
    /// done (with its result), failed or cancelled (with why), or unknown. Tracked jobs keep
    /// one; of others, only a failure is known.
    Status {
        /// The job's uuid.
        uuid: uuid::Uuid,
    },
    /// Ask a job to stop, wherever it waits or runs: a waiting one is settled as cancelled
    /// when a worker reaches it, a running one is told at once and stopped after the worker's
    /// --cancel-grace. A job that has finished is left alone.
    Cancel {
        /// The job's uuid.
        uuid: uuid::Uuid,
    },
    /// Tail a queue's events (queued, active, progress, completed, failed, released,
    /// cancelled) as they happen, or turn them on or off for the queue (--on, --off).
    Events {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Turn the queue's events on, its stream kept at about --max entries.
        #[arg(long, conflicts_with = "off")]
        on: bool,
        /// Turn the queue's events off (the stream is kept until deleted).
        #[arg(long)]
        off: bool,
        /// With --on: how many events the stream keeps, about.
        #[arg(long, default_value_t = 10_000)]
        max: u64,
        /// Stop after this many events (default: tail until interrupted).
        #[arg(long)]
        count: Option<usize>,
        /// Start after this entry id instead of now (`0-0`: the oldest kept).
        #[arg(long)]
        after: Option<String>,
    },
    /// List a queue's groups with jobs, the busiest first: ready, delayed and running jobs,
    /// limits, weight, and whether each takes turns, waits at a limit or is paused; or pause
    /// or resume a group, set limits, or weigh a group (docs/groups.md).
    Groups {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Show at most this many groups.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Pause this group: none of its jobs starts until it is resumed.
        #[arg(long, value_name = "GROUP", conflicts_with_all = ["resume", "set"])]
        pause: Option<String>,
        /// Resume this paused group.
        #[arg(long, value_name = "GROUP", conflicts_with = "set")]
        resume: Option<String>,
        /// Set the limits of this group, or of every group of the queue (`*`), to
        /// --concurrency and --rate (a limit left out is cleared).
        #[arg(long, value_name = "GROUP")]
        set: Option<String>,
        /// With --set: the most jobs of a group running at once.
        #[arg(long, requires = "set")]
        concurrency: Option<u32>,
        /// With --set: the most jobs of a group started within a period, JOBS/SECONDS.
        #[arg(long, requires = "set", value_name = "JOBS/SECONDS")]
        rate: Option<redjob::queue::GroupRate>,
        /// Give a group a weight: it takes WEIGHT jobs in each of its turns where the others
        /// take one (1 clears it).
        #[arg(
            long,
            num_args = 2,
            value_names = ["GROUP", "WEIGHT"],
            conflicts_with_all = ["pause", "resume", "set"]
        )]
        weight: Option<Vec<String>>,
    },
    /// List the locks of unique jobs and the jobs that hold them, or free one
    /// (`jobsctl unique forget KEY`).
    Unique {
        /// Free locks instead of listing them.
        #[command(subcommand)]
        forget: Option<UniqueForget>,
        /// Only the locks of this job type.
        #[arg(long)]
        job: Option<String>,
        /// About this many locks: one page.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Go on after this cursor: the one a listing printed for its next page.
        #[arg(long)]
        after: Option<String>,
    },
    /// List batches with their progress, newest first, or show, cancel, retry or prune them
    /// (`jobsctl batches show ID`).
    Batches {
        /// Show, cancel, retry or prune instead of listing.
        #[command(subcommand)]
        command: Option<BatchCommand>,
        /// At most this many batches in the list: one page.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Only batches whose name contains this text (ignoring case).
        #[arg(long)]
        name: Option<String>,
        /// Only batches in this state: running, cancelling, cancelled, finished or
        /// finished-with-failures.
        #[arg(long)]
        state: Option<BatchState>,
        /// Go on after this cursor: the one a listing printed for its next page.
        #[arg(long)]
        after: Option<String>,
    },
    /// List the schedules workers keep (when, next tick, last fired, last outcome, stale), or
    /// ask a worker to run one now (`jobsctl schedule run NAME`).
    Schedule {
        /// Run a schedule now instead of listing.
        #[command(subcommand)]
        command: Option<ScheduleCommand>,
    },
    /// Serve the live web dashboard (see docs/operations.md).
    Dashboard(super::dashboard::DashboardArgs),
}

/// `jobsctl waits set` and `jobsctl waits clear`.
#[derive(Debug, Subcommand)]
pub(super) enum WaitsCommand {
    /// Set how many seconds a queue's jobs may wait before `jobsctl monitor` fails, the
    /// dashboard highlights it and the metrics flag it.
    Set {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Seconds, at least 1.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        seconds: u64,
    },
    /// Remove a queue's wait threshold (a worker started with `--wait` for it sets it again).
    Clear {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
    },
}

/// `jobsctl schedule run NAME`.
#[derive(Debug, Subcommand)]
pub(super) enum ScheduleCommand {
    /// Push the schedule's job now, outside its ticks, through a worker that keeps it.
    Run {
        /// The schedule's name.
        name: String,
    },
}

/// `jobsctl batches ...`.
#[derive(Debug, Subcommand)]
pub(super) enum BatchCommand {
    /// Show a batch: its counts, times and failed jobs.
    Show {
        /// The batch's id.
        id: String,
    },
    /// Cancel a batch: its jobs not started yet are skipped.
    Cancel {
        /// The batch's id.
        id: String,
    },
    /// Push a batch's failed jobs back onto their queues (as `jobsctl retry`).
    Retry {
        /// The batch's id.
        id: String,
    },
    /// Delete the batches that finished more than --hours ago.
    Prune {
        /// Delete those that finished more than this many hours ago.
        #[arg(long)]
        hours: u64,
    },
}

/// A queue name from the command line, refused by the rule workers and dispatch apply.
fn queue_name(name: &str) -> Result<String, redjob::queue::keys::InvalidQueueName> {
    redjob::queue::keys::check_queue_name(name)?;
    Ok(name.to_owned())
}

/// `jobsctl unique forget KEY...`.
#[derive(Debug, Subcommand)]
pub(super) enum UniqueForget {
    /// Free unique locks whose jobs were lost (a queue cleared by hand, say), so that the
    /// jobs can be dispatched again.
    Forget {
        /// The locks' keys, as `jobsctl unique` lists them.
        #[arg(required = true)]
        keys: Vec<String>,
    },
}

/// Which failed jobs: the filters `jobsctl failed`, `retry` and `forget` share.
#[derive(Debug, Clone, Default, Args)]
pub(super) struct FilterArgs {
    /// Only jobs of this type (the payload's job or displayName).
    #[arg(long)]
    pub job: Option<String>,
    /// Only jobs whose exception, payload or uuid contains this text (ignoring case).
    #[arg(long)]
    pub search: Option<String>,
    /// Only jobs with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Only jobs that failed at or after this time: RFC 3339 (2026-11-25T10:00:00Z) or an age
    /// (90s, 30m, 2h, 7d ago).
    #[arg(long, value_parser = parse_time)]
    pub since: Option<DateTime<Utc>>,
    /// Only jobs that failed at or before this time, written as for --since.
    #[arg(long, value_parser = parse_time)]
    pub until: Option<DateTime<Utc>>,
}

impl FilterArgs {
    /// Whether any filter is given.
    pub(super) fn any(&self) -> bool {
        self.job.is_some()
            || self.search.is_some()
            || self.tag.is_some()
            || self.since.is_some()
            || self.until.is_some()
    }

    /// The filter, with the queue `queue` and at most `limit` jobs.
    pub(super) fn filter(self, queue: Option<String>, limit: Option<usize>) -> FailedFilter {
        FailedFilter {
            queue,
            job: self.job,
            text: self.search,
            tag: self.tag,
            since: self.since,
            until: self.until,
            limit,
        }
    }
}

/// `jobsctl failed`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct FailedArgs {
    /// Show one failed job.
    #[command(subcommand)]
    pub show: Option<FailedShow>,
    /// Only jobs that failed on this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Which jobs.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// At most this many: one page (default 50, at most 1000).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Go on after this cursor: the one a listing printed for its next page.
    #[arg(long)]
    pub after: Option<String>,
}

/// `jobsctl failed show UUID`.
#[derive(Debug, Subcommand)]
pub(super) enum FailedShow {
    /// Show one failed job: its record, payload and exception.
    Show {
        /// The failed job's uuid.
        uuid: String,
    },
}

/// `jobsctl retry`.
#[derive(Debug, Args)]
pub(super) struct RetryArgs {
    /// `all`, or the uuids of failed jobs.
    pub targets: Vec<String>,
    /// Every failed job of this queue (with the filters below, those of it they match).
    #[arg(long, conflicts_with_all = ["targets", "range"], value_parser = queue_name)]
    pub queue: Option<String>,
    /// Positions A to B, as `jobsctl failed` numbers them (1 is the oldest).
    #[arg(long, conflicts_with_all = ["targets", "queue"])]
    pub range: Option<String>,
    /// Every failed job these match.
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// `jobsctl forget`.
#[derive(Debug, Args)]
pub(super) struct ForgetArgs {
    /// The uuids of the failed jobs.
    pub uuids: Vec<String>,
    /// Every failed job of this queue (with the filters below, those of it they match).
    #[arg(long, conflicts_with = "uuids", value_parser = queue_name)]
    pub queue: Option<String>,
    /// Every failed job these match.
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// The arguments of `jobsctl outbox`.
#[derive(Debug, Args)]
pub(super) struct OutboxArgs {
    /// Print the table's SQL instead.
    #[command(subcommand)]
    pub command: Option<OutboxCommand>,
    /// Measure the table in this PostgreSQL database now, as well as reading what the relays
    /// last measured: the figures for a table no relay serves (feature `postgres`).
    #[cfg_attr(feature = "postgres", arg(long, env = "DATABASE_URL"))]
    #[cfg_attr(not(feature = "postgres"), arg(long))]
    pub database: Option<String>,
    /// The outbox table, as `table` or `schema.table` (default: every table relays serve;
    /// `redjob_outbox` with --database and for `schema`).
    #[arg(long)]
    pub table: Option<String>,
}

/// What `jobsctl outbox` does instead of showing the tables.
#[derive(Debug, Subcommand)]
pub(super) enum OutboxCommand {
    /// Print the SQL that creates the outbox table and its index, for a migration (feature
    /// `postgres`).
    Schema,
}
