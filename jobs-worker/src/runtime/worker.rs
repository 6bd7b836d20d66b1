//! The worker: the loop that keeps the processor busy, and the rules for when it stops.

use futures_util::stream::{FuturesUnordered, StreamExt};
use jobs_core::keys::QueueKeys;
use jobs_core::{QueueConfig, RedisQueue};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::runtime::acker::Acker;
use crate::runtime::control::{self, Control};
use crate::runtime::reserve::{Fetched, Fetcher};
use crate::runtime::lease::{self, Running};
use crate::runtime::time::{sleep_for, sleep_until};
use crate::options::WorkerOptions;
use crate::runtime::processor::{Processor, Settled};
use crate::runtime::reserved::Reserved;
use crate::runtime::outage::Pause;
use crate::stats::Stats;
use crate::runtime::waker::Waker;
use crate::runtime::watchdog::{Guarded, Watchdog};

/// Most pops one worker keeps in flight at once.
const MAX_FETCHES_IN_FLIGHT: usize = 2;

/// How often the worker compares its memory with `--memory`.
const MEMORY_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Why a worker stopped; [`Exit::code`] is its process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A stop was requested (SIGTERM, SIGINT, or [`Worker::stop_token`]).
    Stopped,
    /// `--stop-when-empty`: the queues are empty and no job is running.
    Empty,
    /// `--once` or `--max-jobs`: the job count was reached.
    MaxJobs,
    /// `--max-time`: the time was up.
    MaxTime,
    /// `--memory`: the process grew past the limit.
    MemoryExceeded,
    /// A restart was requested (`jobsctl restart`) after the worker started.
    Restart,
}

impl Exit {
    /// The process exit status: 12 for `MemoryExceeded` (as in Laravel), 0 otherwise.
    pub fn code(self) -> u8 {
        match self {
            Exit::MemoryExceeded => 12,
            _ => 0,
        }
    }
}

/// A worker that cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The options are inconsistent.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// Two job types share a name.
    #[error(transparent)]
    DuplicateJobName(#[from] jobs_core::registry::DuplicateJobName),
    /// The Redis handle could not be created.
    #[error(transparent)]
    Queue(#[from] jobs_core::Error),
    /// The Prometheus endpoint (`--metrics-addr`) could not be started.
    #[error(transparent)]
    Metrics(#[from] crate::prometheus::MetricsError),
}

/// A worker process's main loop.
///
/// ```no_run
/// # async fn demo() -> Result<(), jobs_worker::WorkerError> {
/// use clap::Parser;
/// let options = jobs_worker::WorkerOptions::parse_from(["worker", "--queue", "high,default"]);
/// let worker = jobs_worker::Worker::new(options)?;
/// let stop = worker.stop_token();
/// tokio::spawn(async move {
///     tokio::time::sleep(std::time::Duration::from_secs(60)).await;
///     stop.cancel(); // as SIGTERM would
/// });
/// let exit = worker.run().await;
/// # Ok(()) }
/// ```
pub struct Worker {
    options: Arc<WorkerOptions>,
    queue: RedisQueue,
    stop: CancellationToken,
    stats: Arc<Stats>,
}

impl Worker {
    /// A worker with these options, connecting to `options.redis` on first use, with
    /// [`QueueConfig::default`]: its signing key and TLS CA file come from `JOBS_SIGNING_KEY`
    /// and `REDIS_TLS_CA_FILE`. With `options.metrics_addr`, it starts serving Prometheus
    /// metrics there (once per process).
    pub fn new(options: WorkerOptions) -> Result<Self, WorkerError> {
        let queue = RedisQueue::with_config(&options.redis, QueueConfig::default())?;
        Self::with_queue(options, queue)
    }

    /// A worker with these options that talks to Redis through `queue`, whose
    /// [`QueueConfig`] (command timeout, failed-job store limits, payload limit, connection
    /// name) it uses. `options.redis` is ignored.
    pub fn with_queue(options: WorkerOptions, queue: RedisQueue) -> Result<Self, WorkerError> {
        jobs_core::registry::check()?;
        if options.concurrency == 0 {
            return Err(WorkerError::InvalidOption(
                "--concurrency must be at least 1".into(),
            ));
        }
        for name in &options.queue {
            jobs_core::keys::check_queue_name(name)
                .map_err(|err| WorkerError::InvalidOption(format!("--queue: {err}")))?;
        }
        if let Some(addr) = options.metrics_addr {
            crate::prometheus::install(addr, options.concurrency)?;
        }
        // Jobs that dispatch other jobs reach the same Redis as the worker.
        RedisQueue::set_default(queue.clone());
        Ok(Worker {
            options: Arc::new(options),
            queue,
            stop: CancellationToken::new(),
            stats: Arc::new(Stats::default()),
        })
    }

    /// A token that stops the worker gracefully when cancelled, as SIGTERM does.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Counters of this worker.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Runs until a stop condition; running jobs finish (or are put back after the grace
    /// period) before it returns.
    ///
    /// A handler that blocks its thread past its timeout does not let it return: the
    /// [watchdog](crate::runtime::watchdog) applies the timeout rules to its job and ends the whole
    /// process with status [`watchdog::EXIT_CODE`](crate::runtime::watchdog::EXIT_CODE).
    pub async fn run(self) -> Exit {
        let options = &self.options;
        let queues: Vec<Arc<QueueKeys>> = options
            .queue
            .iter()
            .map(|name| Arc::new(self.queue.queue_keys(name)))
            .collect();
        let signatures = match self.queue.config().signing_key {
            Some(_) => "required",
            None => "unchecked",
        };
        info!(
            worker = %options.name,
            queues = %options.queue.join(","),
            concurrency = options.concurrency,
            signatures,
            jobs = %jobs_core::registry::all().iter().map(|r| r.name()).collect::<Vec<_>>().join(","),
            "worker started"
        );
        if options.timeout == 0 || options.timeout as f64 >= options.retry_after {
            warn!(
                timeout = options.timeout,
                retry_after = options.retry_after,
                "--timeout should be well below --retry-after: a job still running when its \
                 reservation expires is handed to another worker"
            );
        }
        warn_unless_noeviction(&self.queue).await;
        let publishes = self.queue.layout() == jobs_core::keys::KeyLayout::Standalone;
        let control = Arc::new(Control::new(&options.name, publishes));
        let running_jobs = Arc::new(Running::default());
        let publishing = control::start(
            self.queue.clone(),
            control.clone(),
            running_jobs.clone(),
            self.stats.clone(),
            options.clone(),
        )
        .await;
        let queue_sizes =
            crate::prometheus::refresh_queue_sizes(self.queue.clone(), options.queue.clone());
        let fetcher = Fetcher::new(
            self.queue.clone(),
            queues.clone(),
            options.retry_after(),
            control.clone(),
        );
        let waker = Waker::start(&self.queue, &queues, options.sleep(), control.clone());
        let acker = Acker::start(self.queue.clone(), options.retry_after());
        let lease = lease::start(
            self.queue.clone(),
            running_jobs.clone(),
            options.retry_after(),
        );
        // One processor for every job task, shared rather than copied per job.
        let processor = Arc::new(Processor::new(
            self.queue.clone(),
            acker.sender(),
            running_jobs.clone(),
            options.clone(),
            self.stats.clone(),
            control.clone(),
        ));
        let interrupt = CancellationToken::new();
        let watchdog = Watchdog::start(Guarded {
            running: running_jobs,
            processor: Processor::clone(&processor),
            queue: self.queue.clone(),
            acks: acker.sender(),
            stop: self.stop.clone(),
            interrupt: interrupt.clone(),
        });
        let slots = Arc::new(Semaphore::new(options.concurrency));
        let mut running: JoinSet<Settled> = JoinSet::new();
        let started = Instant::now();
        let job_limit = if options.once {
            1
        } else if options.max_jobs > 0 {
            options.max_jobs
        } else {
            u64::MAX
        };
        let mut taken: u64 = 0;
        let mut fetch_pause = Pause::new(Duration::from_millis(100), Duration::from_secs(5));
        let mut last_memory_check: Option<Instant> = None;

        // Pops in flight, each holding the slots its jobs will run in. While the queues hold a
        // backlog, a second pop goes out before the first returns, so Redis reserves the next
        // batch while this process starts the last one.
        let mut fetches = FuturesUnordered::new();
        let mut slots_asked: u64 = 0;
        let mut backlog = false;

        let exit = loop {
            while let Some(joined) = running.try_join_next() {
                reap(joined);
            }
            if self.stop.is_cancelled() {
                break Exit::Stopped;
            }
            if control.restart_requested() {
                break Exit::Restart;
            }
            // Reading the process's memory costs a system call: once per 100 ms is enough.
            if last_memory_check.is_none_or(|at| at.elapsed() >= MEMORY_CHECK_INTERVAL) {
                last_memory_check = Some(Instant::now());
                if memory_mb() > options.memory {
                    warn!(limit_mb = options.memory, "memory limit exceeded");
                    break Exit::MemoryExceeded;
                }
            }
            if options
                .max_time()
                .is_some_and(|max| started.elapsed() >= max)
            {
                break Exit::MaxTime;
            }
            if taken >= job_limit {
                break Exit::MaxJobs;
            }

            let room = job_limit - taken - slots_asked;
            let may_fetch = room > 0
                && (fetches.is_empty() || (backlog && fetches.len() < MAX_FETCHES_IN_FLIGHT));
            // A pop beside one in flight waits for a worthwhile batch of free slots.
            let batch = if fetches.is_empty() {
                1
            } else {
                (options.concurrency as u64 / 4).max(1)
            };
            tokio::select! {
                biased;
                Some(done) = fetches.next() => {
                    let (permits, result): FetchDone = done;
                    slots_asked -= permits.len() as u64;
                    let fetched: Fetched = match result {
                        Ok(fetched) => {
                            fetch_pause.reset();
                            fetched
                        }
                        Err(err) => {
                            backlog = false;
                            let pause = fetch_pause.take();
                            warn!(error = %err, "cannot fetch jobs; retrying in {pause:?}");
                            drop(permits);
                            tokio::select! {
                                _ = tokio::time::sleep(pause) => {}
                                _ = self.stop.cancelled() => {}
                                _ = control.restarted() => {}
                            }
                            continue;
                        }
                    };
                    backlog = fetched.jobs.len() == permits.len();
                    if !fetched.jobs.is_empty() {
                        taken += fetched.jobs.len() as u64;
                        self.start_jobs(&processor, &mut running, fetched.jobs, permits, &interrupt);
                        continue;
                    }
                    drop(permits);
                    if !fetches.is_empty() {
                        continue;
                    }
                    if options.once || (options.stop_when_empty && running.is_empty()) {
                        break Exit::Empty;
                    }
                    let out_of_time = options.max_time().map(|max| started + max);
                    tokio::select! {
                        _ = waker.wait() => {}
                        _ = sleep_for(fetched.next_due) => {}
                        _ = tokio::time::sleep(options.sleep()) => {}
                        _ = sleep_until(out_of_time) => {}
                        _ = self.stop.cancelled() => {}
                        _ = control.restarted() => {}
                        _ = control.paused_changed() => {}
                        Some(joined) = running.join_next(), if options.stop_when_empty => reap(joined),
                    }
                }
                permits = free_slots(&slots, batch.min(room), room), if may_fetch => {
                    slots_asked += permits.len() as u64;
                    fetches.push(fetch_into(&fetcher, permits));
                }
                _ = self.stop.cancelled() => {}
                _ = control.restarted() => {}
            };
        };

        // Jobs already reserved by pops in flight run like any other: nothing popped is dropped.
        while let Some((permits, result)) = fetches.next().await {
            if let Ok(fetched) = result {
                self.start_jobs(&processor, &mut running, fetched.jobs, permits, &interrupt);
            }
        }
        self.finish_running(&mut running, interrupt).await;
        lease.abort();
        if let Some(queue_sizes) = queue_sizes {
            queue_sizes.abort();
        }
        // The watchdog holds a sender of the acker, which closes once every sender is gone.
        drop(watchdog);
        drop(processor);
        acker.close().await;
        publishing.close().await;
        info!(
            worker = %options.name,
            processed = self.stats.processed(),
            failed = self.stats.failed(),
            reason = ?exit,
            "worker stopped"
        );
        exit
    }

    /// Starts each reserved job in its own task, holding one of `permits` until it settles.
    fn start_jobs(
        &self,
        processor: &Arc<Processor>,
        running: &mut JoinSet<Settled>,
        jobs: Vec<Reserved>,
        permits: Vec<OwnedSemaphorePermit>,
        interrupt: &CancellationToken,
    ) {
        for (job, permit) in jobs.into_iter().zip(permits) {
            running.spawn(self.run_job(processor, job, permit, interrupt.clone()));
        }
    }

    fn run_job(
        &self,
        processor: &Arc<Processor>,
        job: Reserved,
        permit: OwnedSemaphorePermit,
        interrupt: CancellationToken,
    ) -> impl std::future::Future<Output = Settled> + Send + 'static {
        let processor = processor.clone();
        let stats = self.stats.clone();
        let rest = self.options.rest();
        async move {
            let settled = processor.process(job, interrupt).await;
            stats.record_processed();
            if !rest.is_zero() {
                tokio::time::sleep(rest).await;
            }
            drop(permit);
            settled
        }
    }

    /// Lets running jobs finish. Once a stop is requested (before or during this wait), they
    /// get the grace period; those still running then are interrupted, which puts them back on
    /// their queues.
    async fn finish_running(&self, running: &mut JoinSet<Settled>, interrupt: CancellationToken) {
        if running.is_empty() {
            return;
        }
        info!(running = running.len(), "waiting for running jobs");
        let grace = self.options.grace();
        let mut deadline = None;
        let mut stop_seen = false;
        loop {
            if !stop_seen && self.stop.is_cancelled() {
                stop_seen = true;
                deadline = grace.map(|grace| Instant::now() + grace);
            }
            tokio::select! {
                joined = running.join_next() => match joined {
                    Some(joined) => reap(joined),
                    None => return,
                },
                _ = self.stop.cancelled(), if !stop_seen => {}
                _ = sleep_until(deadline), if !interrupt.is_cancelled() => {
                    warn!(running = running.len(), "grace period over; putting running jobs back");
                    interrupt.cancel();
                }
            }
        }
    }
}

/// Warns when Redis may evict keys: any `maxmemory-policy` but `noeviction` can silently
/// delete whole queues under memory pressure. Servers that refuse `CONFIG GET` are not checked.
async fn warn_unless_noeviction(queue: &RedisQueue) {
    let mut conn = queue.connection();
    let reply: jobs_core::Result<Vec<String>> = queue
        .timed(
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("maxmemory-policy")
                .query_async(&mut conn),
        )
        .await;
    match reply.as_deref() {
        Ok([_, policy]) if policy != "noeviction" => warn!(
            maxmemory_policy = %policy,
            "Redis may evict keys under memory pressure, deleting queued jobs: \
             set maxmemory-policy to noeviction"
        ),
        Ok(_) => {}
        Err(err) => tracing::debug!(error = %err, "cannot read maxmemory-policy"),
    }
}

/// A finished pop: the slots it was made for, and what it reserved.
type FetchDone = (Vec<OwnedSemaphorePermit>, jobs_core::Result<Fetched>);

/// Reserves jobs for `permits`, handing the permits back with the result.
async fn fetch_into(fetcher: &Fetcher, permits: Vec<OwnedSemaphorePermit>) -> FetchDone {
    let fetched = fetcher.fetch(permits.len()).await;
    (permits, fetched)
}

/// Waits for `min` free slots, then takes as many more as are free, up to `max`.
async fn free_slots(slots: &Arc<Semaphore>, min: u64, max: u64) -> Vec<OwnedSemaphorePermit> {
    let mut permits = Vec::new();
    while (permits.len() as u64) < min {
        permits.push(
            slots
                .clone()
                .acquire_owned()
                .await
                .expect("the slot semaphore is never closed"),
        );
    }
    while (permits.len() as u64) < max {
        match slots.clone().try_acquire_owned() {
            Ok(permit) => permits.push(permit),
            Err(_) => break,
        }
    }
    permits
}

fn reap(joined: Result<Settled, tokio::task::JoinError>) {
    if let Err(err) = joined {
        error!(error = %err, "a job task ended abnormally; its job comes back after retry_after");
    }
}

/// Resident memory of this process in megabytes, from `VmRSS` in `/proc/self/status` (0
/// where that is unavailable, so the limit never applies there).
fn memory_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}
