//! The worker: a job loop with its services around it, from start to stop.

use crate::listeners::{Listener, Listeners};
use redjob::middleware::Layer;
use redjob::{DuplicateState, MissingState, RedisQueue};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::WorkerConfig;
use crate::exit::Exit;
use crate::plugin::Plugin;
use crate::runtime::job_loop::JobLoop;
use crate::runtime::services::{Services, Start};
use crate::runtime::startup::{self, GivenState};
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
    /// Job types declare state (`#[job(state = ...)]`) that the worker was not given.
    #[error("{}", list(.0))]
    MissingState(Vec<MissingState>),
    /// A type of state was given twice.
    #[error(transparent)]
    DuplicateState(#[from] DuplicateState),
    /// A plugin given to the worker cannot run ([`Plugin::check`]): the outbox relay's table
    /// is missing or out of date, say.
    #[error("{plugin}: {reason}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// Why it cannot run.
        reason: String,
    },
}

impl WorkerError {
    /// The process exit status for this error: [`CONFIG_EXIT_CODE`] (78, `EX_CONFIG`) for a
    /// setting to fix (an option, the state, the Redis URL, credentials, ACL or TLS), which
    /// starting again cannot mend; 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            WorkerError::Queue(err) if !err.is_configuration() => 1,
            WorkerError::Metrics(_) => 1,
            _ => CONFIG_EXIT_CODE,
        }
    }
}

/// The exit status of a worker that refuses to start because of its configuration: 78,
/// `EX_CONFIG` of `sysexits.h`, which supervisors such as systemd can be told not to restart.
pub const CONFIG_EXIT_CODE: u8 = 78;

fn list(missing: &[MissingState]) -> String {
    let lines: Vec<String> = missing.iter().map(ToString::to_string).collect();
    lines.join("; ")
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
/// let exit = worker.run().await?;
/// # Ok(()) }
/// ```
pub struct Worker {
    config: Arc<WorkerConfig>,
    middleware: Vec<Layer>,
    listeners: Vec<Arc<dyn Listener>>,
    queue: RedisQueue,
    stop: CancellationToken,
    stats: Arc<Stats>,
    state: GivenState,
    plugins: Vec<Box<dyn Plugin>>,
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
            state: GivenState::default(),
            plugins: Vec::new(),
        })
    }

    /// Runs `middleware` around every job this worker runs, outside the job's own middleware;
    /// middleware added first runs outermost. See [`redjob::middleware`].
    pub fn middleware(mut self, middleware: impl Into<Layer>) -> Self {
        self.middleware.push(middleware.into());
        self
    }

    /// Reports what this worker does to `listener` (see [`crate::listeners`]); listeners added
    /// first are called first.
    pub fn listen(mut self, listener: impl Listener) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Gives every job this worker runs `value`, application state its handlers read with
    /// [`JobContext::state`](redjob::JobContext::state): a database pool, an HTTP client,
    /// settings. One value per type: a second one of a type makes the start fail (wrap one in
    /// a type of its own). The worker refuses to start while a job type linked into the
    /// program declares state it was not given.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.give(value);
        self
    }

    /// Runs `relay` beside the jobs (feature `postgres`): it moves the rows committed into
    /// an outbox into Redis, from the worker's start until it stops. Any number of workers,
    /// on any hosts, may run one. See [`redjob::outbox`].
    #[cfg(feature = "postgres")]
    pub fn relay(self, relay: redjob::outbox::Relay) -> Self {
        self.plugin(relay)
    }

    /// Runs `plugin` beside the jobs: checked before the first job (a failed check refuses
    /// the start), started with the worker's own services, and stopped with them after the
    /// last job settled. Plugins start in the order given and stop in the reverse.
    pub fn plugin(mut self, plugin: impl Plugin) -> Self {
        self.plugins.push(Box::new(plugin));
        self
    }

    /// The Redis handle the worker uses.
    #[cfg(feature = "postgres")]
    pub(crate) fn queue(&self) -> &RedisQueue {
        &self.queue
    }

    /// A token that stops the worker gracefully when cancelled, as SIGTERM does.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Counters of this worker.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Checks what it needs, then runs until a stop condition; running jobs finish (or are
    /// put back after the grace period) before it returns.
    ///
    /// Before it takes a job it refuses to start, with an error whose
    /// [`exit_code`](WorkerError::exit_code) is 78, when a job type declares state it was not
    /// given, or when Redis refuses it (credentials, ACL, TLS, version); a Redis that is not
    /// reachable yet is waited for, the reason logged. It installs no signal handler and
    /// changes nothing for the rest of the process: the jobs it runs dispatch through its
    /// Redis handle, scoped to their tasks. What happens to a handler that blocks its thread
    /// past its timeout is [`WorkerConfig::on_blocked`].
    pub async fn run(self) -> Result<Exit, WorkerError> {
        // The listeners called from this task dispatch through the worker's handle too, as
        // the jobs' and hooks' tasks do.
        let queue = self.queue.clone();
        queue.scope(self.run_scoped()).await
    }

    /// [`Worker::run`], inside the scope of the worker's Redis handle.
    async fn run_scoped(self) -> Result<Exit, WorkerError> {
        let state = self.state.checked()?;
        redjob::job::registry::check_state(state).map_err(WorkerError::MissingState)?;
        for plugin in &self.plugins {
            plugin.check().await.map_err(|reason| WorkerError::Plugin {
                plugin: plugin.name(),
                reason,
            })?;
        }
        if !startup::wait_for_redis(&self.queue, &self.stop).await? {
            return Ok(Exit::Stopped);
        }
        self.announce().await;
        let listeners = Listeners::new(self.listeners.clone());
        let services = Services::start(Start {
            queue: &self.queue,
            config: &self.config,
            middleware: &self.middleware,
            state,
            listeners: &listeners,
            stats: &self.stats,
            stop: &self.stop,
            plugins: self.plugins,
        })
        .await;
        let exit = JobLoop::new(&self.config, &services, &self.stats, &self.stop)
            .run()
            .await;
        services.stop().await;
        listeners.emit("stopping", |l| l.stopping(&exit)).await;
        info!(
            worker = %self.config.name,
            processed = self.stats.processed(),
            failed = self.stats.failed(),
            reason = ?exit,
            "worker stopped"
        );
        Ok(exit)
    }

    /// Runs as [`Worker::run`] until `shutdown` completes, then stops gracefully, as its stop
    /// token would: for a worker embedded in a service, stopped by the service's own shutdown
    /// signal.
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue) -> Result<(), Box<dyn std::error::Error>> {
    /// use redjob_worker::{Worker, WorkerConfig};
    /// let shutdown = tokio_util::sync::CancellationToken::new();
    /// let worker = Worker::new(WorkerConfig::default(), queue)?;
    /// let running = tokio::spawn(worker.run_until(shutdown.clone().cancelled_owned()));
    /// // ... serve HTTP until the service is asked to stop, then:
    /// shutdown.cancel();
    /// let exit = running.await??;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<Exit, WorkerError> {
        let stop = self.stop_token();
        let running = self.run();
        tokio::pin!(running);
        tokio::select! {
            exit = &mut running => exit,
            () = shutdown => {
                stop.cancel();
                running.await
            }
        }
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
        warn_of_unserved_queues(&config.queues);
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

/// Warns when job types linked into the program declare queues (`#[job(queue = ...)]`, else
/// `default`) that this worker does not take jobs from: their dispatches wait there for
/// another worker, and a deployment that has none never runs them, with nothing said.
fn warn_of_unserved_queues(served: &[String]) {
    let mut unserved: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for registration in redjob::job::registry::all() {
        let declared = registration
            .options()
            .queue
            .unwrap_or(redjob::DEFAULT_QUEUE);
        if !served.iter().any(|queue| queue == declared) {
            unserved
                .entry(declared)
                .or_default()
                .push(registration.name());
        }
    }
    if unserved.is_empty() {
        return;
    }
    let listed: Vec<String> = unserved
        .iter()
        .map(|(queue, jobs)| format!("{queue} ({})", jobs.join(",")))
        .collect();
    warn!(
        queues = %served.join(","),
        unserved = %listed.join("; "),
        "job types linked into this worker declare queues it does not take jobs from: their \
         jobs wait there for a worker that does (--queue names the queues to take)"
    );
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
