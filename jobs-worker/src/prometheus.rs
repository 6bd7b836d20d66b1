//! The worker's Prometheus endpoint (`--metrics-addr`): job counters and run times fed where
//! each job settles, the running jobs, and the sizes and waits of the worker's queues, the
//! pending batches and the outbox relays' figures, read from Redis every
//! [`QUEUE_SIZES_EVERY`]. `docs/operations.md` lists every metric.
//!
//! The `metrics` crate's recorder is global to the process, so one worker per process can
//! export. Until [`install`] succeeds, recording is skipped before any label is built.

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redjob::admin::AttemptOutcome;
use redjob::admin::{Admin, QueueStats};
use redjob::RedisQueue;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// Counter of settled attempts, labelled `queue`, `job` and `outcome`.
pub(crate) const JOBS_PROCESSED: &str = "jobs_processed_total";
/// Histogram of attempts' run times in seconds, labelled `queue` and `job`.
pub(crate) const JOB_RUNTIME: &str = "jobs_runtime_seconds";
/// Gauge of the jobs this worker is running.
pub(crate) const RUNNING_JOBS: &str = "jobs_running_jobs";
/// Gauge of this worker's `--concurrency`.
pub(crate) const CONCURRENCY: &str = "jobs_worker_concurrency";
/// Gauge of the jobs in a queue, labelled `queue` and `section` (ready, delayed, reserved).
pub(crate) const QUEUE_JOBS: &str = "jobs_queue_jobs";
/// Gauge of the age of a queue's oldest ready job in seconds (0 when nothing is ready).
pub(crate) const QUEUE_OLDEST_READY: &str = "jobs_queue_oldest_ready_seconds";
/// Gauge that is 1 while a queue is paused, else 0.
pub(crate) const QUEUE_PAUSED: &str = "jobs_queue_paused";
/// Gauge of how long a queue's oldest waiting job has waited, in seconds (0 when none waits).
pub(crate) const QUEUE_WAIT: &str = "jobs_queue_wait_seconds";
/// Gauge of a queue's wait threshold in seconds (0 when it has none).
pub(crate) const QUEUE_WAIT_THRESHOLD: &str = "jobs_queue_wait_threshold_seconds";
/// Gauge that is 1 while a queue's wait is over its threshold, else 0.
pub(crate) const QUEUE_WAIT_EXCEEDED: &str = "jobs_queue_wait_exceeded";

/// Gauge of a queue's groups that have jobs, labelled `queue`.
pub(crate) const QUEUE_GROUPS: &str = "jobs_queue_groups";
/// Gauge of the jobs of one of a queue's busiest groups, labelled `queue`, `group` and
/// `section` (ready, delayed, running): the [`BUSIEST_GROUPS`] with the most ready jobs only,
/// so that the series stay few however many groups there are.
pub(crate) const GROUP_JOBS: &str = "jobs_group_jobs";
/// How many of a queue's groups have gauges of their own.
pub(crate) const BUSIEST_GROUPS: usize = 10;

/// Gauge of the batches not finished yet.
pub(crate) const BATCHES_PENDING: &str = "jobs_batches_pending";
/// Gauge of the jobs pending in the batches not finished yet.
pub(crate) const BATCH_JOBS_PENDING: &str = "jobs_batch_jobs_pending";

/// Gauge of how late a schedule's last tick fired, in seconds, by the worker that fired it.
pub(crate) const SCHEDULE_LATENESS: &str = "jobs_schedule_lateness_seconds";

/// Gauge of the live relays of an outbox table, labelled `table`.
pub(crate) const OUTBOX_RELAYS: &str = "jobs_outbox_relays";
/// Gauge of an outbox table's rows, labelled `table` and `state` (waiting, kept), as its
/// relays last measured them.
pub(crate) const OUTBOX_ROWS: &str = "jobs_outbox_rows";
/// Gauge of how far an outbox's relays are behind, in seconds: the age of its oldest waiting
/// row when last measured.
pub(crate) const OUTBOX_LAG: &str = "jobs_outbox_lag_seconds";

/// Gauge of how long jobs of a type some worker could not run have waited for one that can,
/// in seconds since a worker first met one, labelled `job`, `queue` and `runnable` (`yes`
/// while a live worker links the type, else `no`); 0 once no worker meets them any more.
pub(crate) const UNRUNNABLE_WAIT: &str = "jobs_unrunnable_wait_seconds";

/// How often the queue gauges are read from Redis.
pub(crate) const QUEUE_SIZES_EVERY: Duration = Duration::from_secs(5);

/// Upper bounds of the run time histogram's buckets, in seconds.
pub(crate) const RUNTIME_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The endpoint could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve Prometheus metrics on {addr}: {reason}")]
pub struct MetricsError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why (the address is in use, a recorder is already installed, ...).
    pub reason: String,
}

/// Serves the metrics at `http://addr/metrics` (any path answers) from now on. Inside a Tokio
/// runtime the endpoint runs on it; outside one, on a thread of its own.
pub(crate) fn install(addr: SocketAddr, concurrency: usize) -> Result<(), MetricsError> {
    let error = |reason: String| MetricsError { addr, reason };
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Full(JOB_RUNTIME.to_owned()), &RUNTIME_BUCKETS)
        .map_err(|e| error(e.to_string()))?
        .install()
        .map_err(|e| error(e.to_string()))?;
    describe_counter!(
        JOBS_PROCESSED,
        "Attempts settled by this worker, by queue, job and outcome (done, released, failed)."
    );
    describe_histogram!(
        JOB_RUNTIME,
        metrics::Unit::Seconds,
        "Run time of each attempt, from reservation to verdict."
    );
    describe_gauge!(RUNNING_JOBS, "Jobs this worker is running now.");
    describe_gauge!(CONCURRENCY, "Jobs this worker runs at once at most.");
    describe_gauge!(
        QUEUE_JOBS,
        "Jobs in each of this worker's queues, by section (ready, delayed, reserved)."
    );
    describe_gauge!(
        QUEUE_OLDEST_READY,
        metrics::Unit::Seconds,
        "Age of the oldest ready job of each of this worker's queues (0 when none is ready)."
    );
    describe_gauge!(QUEUE_PAUSED, "1 while the queue is paused, else 0.");
    describe_gauge!(
        QUEUE_WAIT,
        metrics::Unit::Seconds,
        "How long the oldest waiting job of each of this worker's queues has waited (0 when none waits)."
    );
    describe_gauge!(
        QUEUE_WAIT_THRESHOLD,
        metrics::Unit::Seconds,
        "The wait threshold of each of this worker's queues (0 when it has none)."
    );
    describe_gauge!(
        QUEUE_WAIT_EXCEEDED,
        "1 while the queue's wait is over its threshold, else 0."
    );
    describe_gauge!(QUEUE_GROUPS, "Groups of the queue that have jobs.");
    describe_gauge!(
        GROUP_JOBS,
        "Jobs of the queue's busiest groups (the 10 with the most ready jobs), by section."
    );
    describe_gauge!(BATCHES_PENDING, "Batches not finished yet.");
    describe_gauge!(OUTBOX_RELAYS, "Live relays of each outbox table.");
    describe_gauge!(
        OUTBOX_ROWS,
        "Rows of each outbox table, by state (waiting for a relay, kept with a problem), as its relays last measured them."
    );
    describe_gauge!(
        OUTBOX_LAG,
        metrics::Unit::Seconds,
        "How far each outbox's relays are behind: the age of its oldest waiting row when last measured."
    );
    describe_gauge!(
        SCHEDULE_LATENESS,
        metrics::Unit::Seconds,
        "How late the last tick of each schedule this worker fired was pushed."
    );
    describe_gauge!(
        BATCH_JOBS_PENDING,
        "Jobs not settled yet in the batches not finished yet."
    );
    describe_gauge!(
        UNRUNNABLE_WAIT,
        metrics::Unit::Seconds,
        "How long jobs of a type some worker could not run have waited for one that can (runnable: whether a live worker links the type)."
    );
    gauge!(CONCURRENCY).set(concurrency as f64);
    gauge!(RUNNING_JOBS).set(0.0);
    INSTALLED.store(true, Ordering::Relaxed);
    info!(%addr, "serving Prometheus metrics");
    Ok(())
}

fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Counts one settled attempt and its run time.
pub(crate) fn record(queue: &str, job: &str, outcome: AttemptOutcome, runtime: Duration) {
    if !installed() {
        return;
    }
    let (queue, job) = (queue.to_owned(), job.to_owned());
    counter!(JOBS_PROCESSED, "queue" => queue.clone(), "job" => job.clone(), "outcome" => outcome.as_str())
        .increment(1);
    histogram!(JOB_RUNTIME, "queue" => queue, "job" => job).record(runtime.as_secs_f64());
}

/// Records how late a schedule's tick fired.
pub(crate) fn record_schedule(schedule: &str, late: Duration) {
    if installed() {
        gauge!(SCHEDULE_LATENESS, "schedule" => schedule.to_owned()).set(late.as_secs_f64());
    }
}

/// A job counted in [`RUNNING_JOBS`] until this is dropped.
pub(crate) struct RunningJob(bool);

/// Counts a job as running until the returned guard is dropped.
pub(crate) fn running_job() -> RunningJob {
    let counted = installed();
    if counted {
        gauge!(RUNNING_JOBS).increment(1.0);
    }
    RunningJob(counted)
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        if self.0 {
            gauge!(RUNNING_JOBS).decrement(1.0);
        }
    }
}

/// Reads the sizes of `queues` every [`QUEUE_SIZES_EVERY`] into the queue gauges, when the
/// endpoint is installed. A failed read leaves the last values and is logged once.
pub(crate) fn refresh_queue_sizes(
    queue: RedisQueue,
    queues: Vec<String>,
) -> Option<JoinHandle<()>> {
    if !installed() {
        return None;
    }
    let admin = Admin::new(queue);
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(QUEUE_SIZES_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        let mut outboxes = HashSet::new();
        let mut busiest = HashSet::new();
        let mut unrunnable = HashSet::new();
        loop {
            ticks.tick().await;
            match admin.queues_stats(&queues).await {
                Ok(stats) => {
                    failing = false;
                    stats.iter().for_each(publish_queue);
                    for stats in stats.iter().filter(|stats| stats.groups > 0) {
                        publish_groups(&admin, &stats.name, &mut busiest).await;
                    }
                    publish_batches(&admin).await;
                    publish_outboxes(&admin, &mut outboxes).await;
                    publish_unrunnable(&admin, &mut unrunnable).await;
                }
                Err(err) => {
                    if !failing {
                        warn!(error = %err, "cannot read queue sizes for the metrics");
                        failing = true;
                    }
                }
            }
        }
    }))
}

/// Reads the busiest groups of `queue` into their gauges. A group that is no longer among
/// them has its gauges set to 0 once, and is forgotten: `published` holds the (queue, group)
/// pairs with gauges above 0.
async fn publish_groups(admin: &Admin, queue: &str, published: &mut HashSet<(String, String)>) {
    let groups = match admin.queue().groups(queue).list().await {
        Ok(listed) => listed.groups,
        Err(err) => {
            warn!(error = %err, queue, "cannot read the groups for the metrics");
            return;
        }
    };
    let busiest = &groups[..groups.len().min(BUSIEST_GROUPS)];
    let set = |group: &str, sizes: [u64; 3]| {
        for (section, jobs) in ["ready", "delayed", "running"].into_iter().zip(sizes) {
            gauge!(GROUP_JOBS, "queue" => queue.to_owned(), "group" => group.to_owned(), "section" => section)
                .set(jobs as f64);
        }
    };
    published.retain(|(of, group)| {
        let still = of != queue || busiest.iter().any(|busy| &busy.name == group);
        if !still {
            set(group, [0, 0, 0]);
        }
        still
    });
    for group in busiest {
        set(&group.name, [group.ready, group.delayed, group.running]);
        published.insert((queue.to_owned(), group.name.clone()));
    }
}

/// Reads the job types waiting for a worker that can run them into their gauges. A type no
/// longer listed has its gauge set to 0 once, and is forgotten: `published` holds the label
/// sets above 0.
async fn publish_unrunnable(admin: &Admin, published: &mut HashSet<[String; 3]>) {
    let Ok(listed) = admin.unrunnable().await else {
        return;
    };
    let now = chrono::Utc::now();
    let mut now_published = HashSet::new();
    for jobs in listed {
        let runnable = if jobs.runnable_by > 0 { "yes" } else { "no" };
        let labels = [jobs.job, jobs.queue, runnable.to_owned()];
        let waited = (now - jobs.since).num_milliseconds().max(0) as f64 / 1000.0;
        unrunnable_gauge(&labels).set(waited);
        now_published.insert(labels);
    }
    for gone in published.difference(&now_published) {
        unrunnable_gauge(gone).set(0.0);
    }
    *published = now_published;
}

fn unrunnable_gauge([job, queue, runnable]: &[String; 3]) -> metrics::Gauge {
    gauge!(UNRUNNABLE_WAIT, "job" => job.clone(), "queue" => queue.clone(), "runnable" => runnable.clone())
}

/// Reads the pending batches into their gauges; a failed read leaves the last values.
async fn publish_batches(admin: &Admin) {
    match admin.pending_batches().await {
        Ok(pending) => {
            gauge!(BATCHES_PENDING).set(pending.batches as f64);
            gauge!(BATCH_JOBS_PENDING).set(pending.jobs as f64);
        }
        Err(err) => warn!(error = %err, "cannot read the pending batches for the metrics"),
    }
}

/// Reads what the live outbox relays last measured into the outbox gauges. A table whose
/// relays have all gone keeps its last figures, with no relay: `tables` remembers the tables
/// seen before.
async fn publish_outboxes(admin: &Admin, tables: &mut HashSet<String>) {
    let reports = match admin.outboxes().await {
        Ok(reports) => reports,
        Err(err) => {
            warn!(error = %err, "cannot read the outbox relays for the metrics");
            return;
        }
    };
    for table in tables.iter() {
        if !reports.iter().any(|report| &report.table == table) {
            gauge!(OUTBOX_RELAYS, "table" => table.clone()).set(0.0);
        }
    }
    for report in reports {
        let table = report.table;
        gauge!(OUTBOX_RELAYS, "table" => table.clone()).set(report.relays as f64);
        if let Some(status) = report.status {
            gauge!(OUTBOX_ROWS, "table" => table.clone(), "state" => "waiting")
                .set(status.waiting as f64);
            gauge!(OUTBOX_ROWS, "table" => table.clone(), "state" => "kept")
                .set(status.kept as f64);
            gauge!(OUTBOX_LAG, "table" => table.clone()).set(status.lag().as_secs_f64());
        }
        tables.insert(table);
    }
}

/// Sets the gauges of one queue from its stats.
fn publish_queue(stats: &QueueStats) {
    let name = &stats.name;
    for (section, jobs) in [
        ("ready", stats.ready),
        ("delayed", stats.delayed),
        ("reserved", stats.reserved),
    ] {
        gauge!(QUEUE_JOBS, "queue" => name.clone(), "section" => section).set(jobs as f64);
    }
    gauge!(QUEUE_GROUPS, "queue" => name.clone()).set(stats.groups as f64);
    let flag = |on: bool| if on { 1.0 } else { 0.0 };
    let secs = |secs: Option<u64>| secs.unwrap_or(0) as f64;
    gauge!(QUEUE_OLDEST_READY, "queue" => name.clone()).set(secs(stats.oldest_ready_secs));
    gauge!(QUEUE_PAUSED, "queue" => name.clone()).set(flag(stats.paused));
    gauge!(QUEUE_WAIT, "queue" => name.clone()).set(secs(stats.wait_secs));
    gauge!(QUEUE_WAIT_THRESHOLD, "queue" => name.clone()).set(secs(stats.wait_threshold_secs));
    gauge!(QUEUE_WAIT_EXCEEDED, "queue" => name.clone()).set(flag(stats.wait_exceeded));
}
