//! The worker: a job loop with its services around it, from start to stop.

use crate::events::{Listener, Listeners};
use redjob::middleware::Layer;
use redjob::RedisQueue;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::WorkerConfig;
use crate::runtime::exit::Exit;
use crate::runtime::job_loop::JobLoop;
use crate::runtime::services::Services;
use crate::runtime::waits;
use crate::stats::Stats;

/// A worker that cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The options are inconsistent.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// Two job types share a name.
    #[error(transparent)]
    DuplicateJobName(#[from] redjob::job::registry::DuplicateJobName),
    /// The Redis handle could not be created.
    #[error(transparent)]
    Queue(#[from] redjob::Error),
    /// The Prometheus endpoint (`--metrics-addr`) could not be started.
    #[error(transparent)]
    Metrics(#[from] crate::prometheus::MetricsError),
}

/// A worker: takes jobs from its queues, runs them and settles them until it stops.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use redjob_worker::{Worker, WorkerConfig};
/// let config = WorkerConfig {
///     queues: vec!["high".into(), "default".into()],
///     ..Default::default()
/// };
/// let queue = redjob::RedisQueue::open("redis://127.0.0.1:6379")?;
/// let worker = Worker::new(config, queue)?;
/// let stop = worker.stop_token();
/// tokio::spawn(async move {
///     tokio::time::sleep(std::time::Duration::from_secs(60)).await;
///     stop.cancel(); // as SIGTERM would
/// });
/// let exit = worker.run().await;
/// # Ok(()) }
/// ```
pub struct Worker {
    config: Arc<WorkerConfig>,
    middleware: Vec<Layer>,
    listeners: Vec<Arc<dyn Listener>>,
    queue: RedisQueue,
    stop: CancellationToken,
    stats: Arc<Stats>,
}

impl Worker {
    /// A worker with `config` that talks to Redis through `queue`, whose
    /// [`QueueConfig`](redjob::QueueConfig) (command timeout, failed-job store limits,
    /// payload limit, signing key, connection name) it uses. Checks the configuration and the
    /// job registry; changes nothing outside the worker.
    pub fn new(config: WorkerConfig, queue: RedisQueue) -> Result<Self, WorkerError> {
        redjob::job::registry::check()?;
        if config.concurrency == 0 {
            return Err(WorkerError::InvalidOption(
                "--concurrency must be at least 1".into(),
            ));
        }
        for name in &config.queues {
            redjob::queue::keys::check_queue_name(name)
                .map_err(|err| WorkerError::InvalidOption(format!("--queue: {err}")))?;
        }
        Ok(Worker {
            config: Arc::new(config),
            middleware: Vec::new(),
            listeners: Vec::new(),
            queue,
            stop: CancellationToken::new(),
            stats: Arc::new(Stats::default()),
        })
    }

    /// Runs `middleware` around every job this worker runs, outside the job's own middleware;
    /// middleware added first runs outermost. See [`redjob::middleware`].
    pub fn middleware(mut self, middleware: impl Into<Layer>) -> Self {
        self.middleware.push(middleware.into());
        self
    }

    /// Reports what this worker does to `listener` (see [`crate::events`]); listeners added
    /// first are called first.
    pub fn listen(mut self, listener: impl Listener) -> Self {
        self.listeners.push(Arc::new(listener));
        self
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
    /// period) before it returns. While it runs, its Redis handle is the process's default
    /// ([`RedisQueue::set_default`]), so jobs that dispatch other jobs reach the same Redis.
    ///
    /// A handler that blocks its thread past its timeout does not let it return: the watchdog
    /// applies the timeout rules to its job and ends the whole process with status
    /// [`WATCHDOG_EXIT_CODE`](crate::WATCHDOG_EXIT_CODE).
    pub async fn run(self) -> Exit {
        RedisQueue::set_default(self.queue.clone());
        self.announce().await;
        let waits = waits::write(&self.queue, &self.config.waits, &self.stop).await;
        let listeners = Listeners::new(self.listeners.clone());
        let services = Services::start(
            &self.queue,
            &self.config,
            &self.middleware,
            &listeners,
            &self.stats,
            &self.stop,
        )
        .await;
        let exit = JobLoop::new(&self.config, &services, &self.stats, &self.stop)
            .run()
            .await;
        services.stop().await;
        if let Some(waits) = waits {
            waits.abort();
        }
        listeners.emit("stopping", |l| l.stopping(&exit)).await;
        info!(
            worker = %self.config.name,
            processed = self.stats.processed(),
            failed = self.stats.failed(),
            reason = ?exit,
            "worker stopped"
        );
        exit
    }

    /// Logs the start, and warns of settings that risk running a job twice or losing one.
    async fn announce(&self) {
        let config = &self.config;
        let signatures = match self.queue.config().signing_key {
            Some(_) => "required",
            None => "unchecked",
        };
        info!(
            worker = %config.name,
            queues = %config.queues.join(","),
            concurrency = config.concurrency,
            signatures,
            jobs = %redjob::job::registry::all().iter().map(|r| r.name()).collect::<Vec<_>>().join(","),
            "worker started"
        );
        if config
            .timeout
            .is_none_or(|timeout| timeout >= config.retry_after)
        {
            warn!(
                timeout = config.timeout.map_or(0, |timeout| timeout.as_secs()),
                retry_after = config.retry_after.as_secs_f64(),
                "--timeout should be well below --retry-after: a job still running when its \
                 reservation expires is handed to another worker"
            );
        }
        warn_unless_noeviction(&self.queue).await;
    }
}

/// Warns when Redis may evict keys: any `maxmemory-policy` but `noeviction` can silently
/// delete whole queues under memory pressure. Servers that refuse `CONFIG GET` are not checked.
async fn warn_unless_noeviction(queue: &RedisQueue) {
    let reply: redjob::Result<Vec<String>> = queue
        .query(redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy"))
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
