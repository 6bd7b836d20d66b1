//! `RedisQueue`: the connection to Redis and every queue operation of Laravel's flow.

pub mod connection;
pub(crate) mod effects;
pub mod hold;
pub mod keys;
pub(crate) mod scripts;
pub(crate) mod spread;
mod url;

pub use url::{redact_url, redis_client, redis_url_from_env, DEFAULT_REDIS_URL, TLS_CA_FILE_ENV};

use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Pipeline, ScriptInvocation};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::job::delay::Delay;
use crate::job::unique::{Dispatched, Duplicate, UniqueLock};
use crate::payload::encrypted::LaravelKey;
use crate::payload::failed::FailedJob;
use crate::payload::signing::SigningKey;
use crate::payload::Payload;
use crate::queue::connection::{Connection, Target};
use crate::queue::effects::Effects;
use crate::queue::hold::Hold;
use crate::queue::keys::{check_queue_name, KeyLayout, Keys, QueueKeys};
use crate::workflow::batch::CallbackCache;
use crate::workflow::{BatchProgress, ChainProgress};

/// Settings of a [`RedisQueue`].
///
/// The credentials and TLS come from the URL: `redis://user:password@host:6379/0` logs in
/// with Redis AUTH (an ACL user, or only `:password@` for `requirepass`), and `rediss://`
/// connects over TLS, verifying the server's certificate against the system's trusted
/// certificates, or against [`QueueConfig::tls_ca_file`] when it is set.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// The longest any one Redis call may take before it fails with [`Error::Timeout`]
    /// (default 5 s). Dispatch never waits longer than this.
    pub command_timeout: Duration,
    /// The largest payload accepted, in bytes (default 4 MiB). Dispatch refuses a larger one
    /// with [`Error::PayloadTooLarge`]; a worker fails a larger one it reserves without
    /// decoding it.
    pub max_payload_bytes: usize,
    /// How many failed jobs the failed-job store keeps at most (default 10,000).
    pub failed_max_jobs: u64,
    /// How long the failed-job store keeps a failed job (default 180 days).
    pub failed_max_age: Duration,
    /// The connection name written into failed-job records (default `"redis"`).
    pub connection_name: String,
    /// The key that signs every pushed payload and, in a worker, must have signed every
    /// payload it runs (see [`crate::payload::signing`]). Default: the key in `JOBS_SIGNING_KEY`
    /// ([`crate::payload::signing::SIGNING_KEY_ENV`]), or none.
    pub signing_key: Option<SigningKey>,
    /// A PEM file of the CA certificates that a `rediss://` server's certificate must chain
    /// to, instead of the system's trusted certificates. Default: the path in
    /// `REDIS_TLS_CA_FILE` ([`TLS_CA_FILE_ENV`]), or none. It is read when the handle is
    /// created; setting it for a `redis://` URL is an error ([`Error::InvalidTls`]).
    pub tls_ca_file: Option<PathBuf>,
    /// The prefix put before every key this handle reads or writes, to share queues with a
    /// Laravel app whose Redis connection has one (`database.redis.options.prefix`, by
    /// default `<app>_database_`). Default: the value of `REDIS_PREFIX`
    /// ([`keys::PREFIX_ENV`]), or none.
    pub prefix: String,
    /// The Laravel app's key, with which a worker reads the job classes the app queues
    /// encrypted (`ShouldBeEncrypted`). Default: the key in `APP_KEY`
    /// ([`crate::payload::encrypted::APP_KEY_ENV`]), or none.
    pub laravel_key: Option<LaravelKey>,
    /// How long a finished batch's record is kept (default 7 days); `jobsctl batches prune`
    /// deletes finished batches sooner.
    pub batch_retention: Duration,
}

impl Default for QueueConfig {
    /// The defaults listed on each field; `signing_key`, `tls_ca_file`, `prefix` and
    /// `laravel_key` come from the environment.
    fn default() -> Self {
        QueueConfig {
            command_timeout: Duration::from_secs(5),
            max_payload_bytes: 4 * 1024 * 1024,
            failed_max_jobs: 10_000,
            failed_max_age: Duration::from_secs(180 * 24 * 3600),
            connection_name: "redis".to_owned(),
            signing_key: SigningKey::from_env(),
            tls_ca_file: std::env::var_os(TLS_CA_FILE_ENV)
                .filter(|path| !path.is_empty())
                .map(PathBuf::from),
            prefix: std::env::var(keys::PREFIX_ENV).unwrap_or_default(),
            laravel_key: LaravelKey::from_env(),
            batch_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Sizes of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSize {
    /// Jobs in the ready list.
    pub ready: u64,
    /// Jobs delayed or released, waiting for their due time.
    pub delayed: u64,
    /// Jobs reserved by workers.
    pub reserved: u64,
}

impl QueueSize {
    /// All jobs of the queue, as Laravel's `size()` counts them.
    pub fn total(&self) -> u64 {
        self.ready + self.delayed + self.reserved
    }
}

/// What one pop returned.
#[derive(Debug, Clone, Default)]
pub struct Popped {
    /// The reserved copies, in queue order: the payloads with `attempts` raised by one.
    pub jobs: Vec<String>,
    /// Reserved payloads that are not UTF-8 text, byte for byte: no job can decode them, and
    /// they must be failed by these exact bytes.
    pub unreadable: Vec<Vec<u8>>,
    /// Time until the next delayed job or reservation falls due, by the server's clock.
    pub next_due: Option<Duration>,
}

/// A job just pushed, as [`RedisQueue::on_queued`] reports it (Laravel's `JobQueued`).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Queued<'a> {
    /// The job's uuid.
    pub uuid: uuid::Uuid,
    /// Its registered name.
    pub job: &'a str,
    /// The queue it went to.
    pub queue: &'a str,
    /// Its delay, for a delayed job.
    pub delay: Option<Delay>,
    /// The payload as pushed.
    pub payload: &'a str,
}

type QueuedListener = Arc<dyn Fn(&Queued<'_>) + Send + Sync>;

/// A job ready to be pushed: its queue, its payload, and its delay if any.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The job's uuid.
    pub uuid: uuid::Uuid,
    /// The job's registered name.
    pub job: std::borrow::Cow<'static, str>,
    /// The queue's name.
    pub queue: String,
    /// The payload JSON.
    pub payload: String,
    /// When set, the job goes to the delayed set: after a delay from the moment Redis runs
    /// the push, or at a point in time.
    pub delay: Option<Delay>,
    /// For a unique job, the lock its push takes.
    pub unique: Option<UniqueDispatch>,
    /// For a debounced job, its debounce window.
    pub debounce: Option<DebounceDispatch>,
}

/// The debounce window of a debounced job's push (see [`crate::Job::debounce_id`]).
#[derive(Debug, Clone)]
pub struct DebounceDispatch {
    /// `<job>:<debounce id>`: the debounce state's key without its prefix.
    pub key: String,
    /// How long the job waits after the last dispatch.
    pub wait: Duration,
    /// How long it waits at most after the first dispatch of its window.
    pub max_wait: Duration,
}

/// The unique lock a unique job's push takes (see [`crate::job::unique`]).
#[derive(Debug, Clone)]
pub struct UniqueDispatch {
    /// The lock as the payload carries it.
    pub lock: UniqueLock,
    /// The job's unique id.
    pub unique_id: String,
    /// How long the lock lasts at most.
    pub lasts: Duration,
}

/// What settling a job changes besides its reservation, applied in the same step.
#[derive(Debug, Default, Clone)]
pub struct Settlement {
    /// What the job held: freed (when it comes back, only what it held for the attempt).
    pub holds: Vec<Hold>,
    /// The chain the job is a link of: when it is done its next link is pushed, when it fails
    /// for good the chain's catch job.
    pub chain: Option<ChainProgress>,
    /// The batch the job belongs to: it is counted there, done or failed, and the batch's
    /// callbacks pushed when it is the one that finishes the batch.
    pub batch: Option<BatchProgress>,
}

impl Settlement {
    /// The uuid of the job whose workflow steps this settles, if it has any.
    fn job(&self) -> Option<uuid::Uuid> {
        self.chain
            .as_ref()
            .map(|chain| chain.link)
            .or(self.batch.as_ref().map(|batch| batch.job))
    }
}

/// A handle to the queues on one Redis server or on a Redis Cluster. Cheap to clone: clones
/// share one multiplexed, self-reconnecting connection (one per node on a cluster).
///
/// A `redis+cluster://host:port,host:port/` URL names a cluster by one or more of its nodes;
/// there every key of a queue carries a hash tag ([`KeyLayout::Cluster`]). Any other URL names
/// one server, whose keys are exactly Laravel's.
///
/// ```no_run
/// # async fn demo() -> Result<(), jobs_core::Error> {
/// use jobs_core::RedisQueue;
/// let queue = RedisQueue::open("redis://127.0.0.1:6379")?;
/// println!("{} jobs waiting", queue.size("default").await?.total());
/// let cluster = RedisQueue::open("redis+cluster://10.0.0.1:7000,10.0.0.2:7000/")?;
/// println!("{} jobs waiting", cluster.size("default").await?.total());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisQueue {
    on_queued: Arc<[QueuedListener]>,
    conn: Connection,
    // Shared: a handle is cloned for every job a worker runs, and a client is costly to copy.
    target: Arc<Target>,
    config: Arc<QueueConfig>,
    keys: Arc<Keys>,
    callbacks: Arc<CallbackCache>,
}

impl std::fmt::Debug for RedisQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisQueue")
            .field("target", &self.target)
            .field("config", &self.config)
            .finish()
    }
}

static DEFAULT_QUEUE: OnceLock<RedisQueue> = OnceLock::new();

tokio::task_local! {
    /// The default handle of the dispatches of a future run by [`RedisQueue::scope`].
    static SCOPED_DEFAULT: RedisQueue;
}

/// The default handle scoped to the running future ([`RedisQueue::scope`]), if any.
pub(crate) fn scoped_default() -> Option<RedisQueue> {
    SCOPED_DEFAULT.try_with(RedisQueue::clone).ok()
}

impl RedisQueue {
    /// A handle to the Redis at `url`, with default settings. It connects on first use. Call
    /// it inside a Tokio runtime.
    pub fn open(url: &str) -> Result<Self> {
        Self::with_config(url, QueueConfig::default())
    }

    /// A handle to the Redis at `url` with the given settings. It connects on first use. Call
    /// it inside a Tokio runtime ([`Error::NoRuntime`] otherwise).
    pub fn with_config(url: &str, config: QueueConfig) -> Result<Self> {
        let target = Target::parse(url, &config)?;
        Self::lazily_connected(Arc::new(target), Arc::new(config))
    }

    /// A handle to the same server (or cluster) with the same settings but a connection of its
    /// own, made and driven by the Tokio runtime this is called in ([`Error::NoRuntime`]
    /// outside one). A thread with a runtime of its own reaches Redis through it even while the
    /// runtime that drives this handle's connection is busy or blocked.
    pub fn with_own_connection(&self) -> Result<Self> {
        Self::lazily_connected(self.target.clone(), self.config.clone())
    }

    fn lazily_connected(target: Arc<Target>, config: Arc<QueueConfig>) -> Result<Self> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NoRuntime);
        }
        let conn = match &*target {
            Target::Single(client) => {
                let manager_config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(config.command_timeout))
                    .set_response_timeout(Some(config.command_timeout))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_millis(500));
                let manager =
                    ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
                        .map_err(Error::from)?;
                Connection::Managed(manager)
            }
            Target::Cluster(client) => {
                let cluster_config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(config.command_timeout)
                    .set_response_timeout(config.command_timeout);
                Connection::Cluster(client.get_pending_async_connection_with_config(cluster_config))
            }
            Target::Fake(_) => Connection::Fake,
        };
        let keys = Arc::new(Keys::new(target.layout(), config.prefix.clone()));
        Ok(RedisQueue {
            on_queued: Arc::new([]),
            conn,
            target,
            config,
            keys,
            callbacks: Arc::default(),
        })
    }

    /// The handle of a fake queue: it records into `recorder` and talks to no Redis.
    pub(crate) fn fake(recorder: Arc<crate::testing::Recorder>) -> Self {
        let config = QueueConfig {
            signing_key: None,
            tls_ca_file: None,
            laravel_key: None,
            ..QueueConfig::default()
        };
        let keys = Arc::new(Keys::new(KeyLayout::Standalone, config.prefix.clone()));
        RedisQueue {
            on_queued: Arc::new([]),
            conn: Connection::Fake,
            target: Arc::new(Target::Fake(recorder)),
            config: Arc::new(config),
            keys,
            callbacks: Arc::default(),
        }
    }

    /// What records this handle's dispatches, when it is a fake queue's.
    pub(crate) fn recorder(&self) -> Option<&crate::testing::Recorder> {
        match &*self.target {
            Target::Fake(recorder) => Some(recorder),
            _ => None,
        }
    }

    /// Whether this is a fake queue's handle ([`crate::testing`]), which records dispatches and
    /// talks to no Redis.
    pub fn is_fake(&self) -> bool {
        self.recorder().is_some()
    }

    /// A handle to the Redis named by `REDIS_URL`, or [`DEFAULT_REDIS_URL`].
    pub fn from_env() -> Result<Self> {
        Self::open(&redis_url_from_env())
    }

    /// The default handle that `.dispatch()` uses: the one scoped to the running future
    /// ([`RedisQueue::scope`]), else a fake queue installed on this thread
    /// ([`crate::testing`]), else the process-wide one given to [`RedisQueue::set_default`],
    /// else one opened from `REDIS_URL` on first use.
    pub fn default_handle() -> Result<Self> {
        if let Some(scoped) = scoped_default().or_else(crate::testing::installed) {
            return Ok(scoped);
        }
        if let Some(queue) = DEFAULT_QUEUE.get() {
            return Ok(queue.clone());
        }
        let queue = Self::from_env()?;
        Ok(DEFAULT_QUEUE.get_or_init(|| queue).clone())
    }

    /// `future`, with this handle as the default handle of the dispatches it makes while it
    /// runs (on whatever thread polls it), instead of the process-wide one.
    pub fn scope<F: std::future::Future>(
        &self,
        future: F,
    ) -> impl std::future::Future<Output = F::Output> {
        SCOPED_DEFAULT.scope(self.clone(), future)
    }

    /// Makes `queue` the process-wide default. Returns `false`, changing nothing, when a
    /// default was already set or used.
    pub fn set_default(queue: RedisQueue) -> bool {
        DEFAULT_QUEUE.set(queue).is_ok()
    }

    /// This handle, calling `listener` for every job it pushes, once the push is done (a
    /// duplicate of a unique job is not pushed, and not reported). The listener runs on the
    /// dispatching task: keep it short. A panic in it is caught and logged; the dispatch
    /// succeeds all the same.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), jobs_core::Error> {
    /// let queue = jobs_core::RedisQueue::open("redis://127.0.0.1:6379")?
    ///     .on_queued(|queued| println!("queued {} on {}", queued.job, queued.queue));
    /// # Ok(()) }
    /// ```
    pub fn on_queued(mut self, listener: impl Fn(&Queued<'_>) + Send + Sync + 'static) -> Self {
        let mut listeners = self.on_queued.to_vec();
        listeners.push(Arc::new(listener));
        self.on_queued = listeners.into();
        self
    }

    /// Tells the `on_queued` listeners of the jobs pushed.
    fn report_queued(&self, envelopes: &[Envelope], outcomes: &[Dispatched]) {
        for (envelope, outcome) in envelopes.iter().zip(outcomes) {
            if outcome.is_duplicate() {
                continue;
            }
            let queued = Queued {
                uuid: envelope.uuid,
                job: &envelope.job,
                queue: &envelope.queue,
                delay: envelope.delay,
                payload: &envelope.payload,
            };
            for listener in self.on_queued.iter() {
                let call = std::panic::AssertUnwindSafe(|| listener(&queued));
                if std::panic::catch_unwind(call).is_err() {
                    tracing::warn!(uuid = %envelope.uuid, "an on_queued listener panicked");
                }
            }
        }
    }

    /// The callback routes of the batches this handle settled jobs of.
    pub(crate) fn callback_cache(&self) -> &CallbackCache {
        &self.callbacks
    }

    /// The settings of this handle.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Where this handle connects to: one server or a cluster. Its
    /// [`Target::dedicated`] opens connections of one's own (a worker's blocking wait, say).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The key layout of this handle: Laravel's names on one server, hash-tagged names on a
    /// cluster.
    pub fn layout(&self) -> KeyLayout {
        self.target.layout()
    }

    /// Every key name of this handle: its layout and its prefix.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The keys of the queue called `name`, in this handle's layout and with its prefix.
    pub fn queue_keys(&self, name: &str) -> QueueKeys {
        self.keys.queue(name)
    }

    /// Pushes jobs in one round trip: ready ones onto their lists with a wake-up token each,
    /// delayed ones into their delayed sets, and unique ones each with its lock, unless another
    /// job holds it. Order within a queue is kept. Returns what became of each, in order.
    ///
    /// With a [`QueueConfig::signing_key`], each payload is signed first
    /// ([`Error::Unsignable`] when one is not a job payload). Nothing is pushed when any
    /// payload is larger than [`QueueConfig::max_payload_bytes`] ([`Error::PayloadTooLarge`]).
    pub async fn push_all(&self, envelopes: &[Envelope]) -> Result<Vec<Dispatched>> {
        let sealed = self.seal(envelopes)?;
        let envelopes = match &sealed {
            Some(sealed) => &sealed[..],
            None => envelopes,
        };
        if let Some(recorder) = self.recorder() {
            return Ok(recorder.push(self, envelopes).await);
        }
        // On a cluster each queue's calls go in a pipeline of their own, to the node that owns
        // the queue's slot; on one server every call goes in one pipeline. A unique job's call
        // is its own, and its reply says whether it was pushed.
        let mut groups: Vec<Group> = Vec::new();
        let mut used: Vec<&redis::Script> = Vec::new();
        let mut offset = 0;
        for run in runs(envelopes) {
            let keys = self.queue_keys(&run[0].queue);
            let name = match self.layout() {
                KeyLayout::Standalone => "",
                KeyLayout::Cluster => run[0].queue.as_str(),
            };
            let group = match groups.iter().position(|g| g.name == name) {
                Some(at) => &mut groups[at],
                None => {
                    groups.push(Group::new(name));
                    groups.last_mut().expect("just pushed")
                }
            };
            let script: &redis::Script = match (&run[0].unique, &run[0].debounce, run[0].delay) {
                (Some(_), _, _) => &scripts::PUSH_UNIQUE,
                (None, Some(_), _) => &scripts::DEBOUNCE,
                (None, None, Some(_)) => &scripts::LATER,
                (None, None, None) => &scripts::PUSH,
            };
            if !used.iter().any(|u| std::ptr::eq(*u, script)) {
                used.push(script);
            }
            match (&run[0].unique, &run[0].debounce) {
                (None, Some(debounce)) => {
                    let envelope = &run[0];
                    let mut call = script.key(self.keys.debounce(&envelope.queue, &debounce.key));
                    call.key(&keys.delayed)
                        .key(&keys.notify)
                        .arg(&envelope.payload)
                        .arg(seconds_arg(debounce.wait))
                        .arg(seconds_arg(debounce.max_wait));
                    group.calls.push(call);
                }
                (Some(unique), _) => {
                    let envelope = &run[0];
                    let lock = self.keys.unique(&envelope.queue, &unique.lock.key);
                    let mut call = script.key(lock);
                    match envelope.delay {
                        Some(_) => call.key(&keys.delayed),
                        None => call.key(&keys.ready),
                    };
                    call.key(&keys.notify)
                        .arg(envelope.uuid.to_string())
                        .arg(unique.lasts.as_millis() as u64)
                        .arg(&envelope.payload)
                        .arg(envelope.delay.map_or(String::new(), |d| due_arg(Some(d))));
                    group.calls.push(call);
                    group.unique_at.push((group.calls.len() - 1, offset));
                }
                (None, None) => {
                    for chunk in run.chunks(1000) {
                        let mut call = match chunk[0].delay {
                            Some(_) => script.key(&keys.delayed),
                            None => script.key(&keys.ready),
                        };
                        call.key(&keys.notify);
                        for envelope in chunk {
                            if envelope.delay.is_some() {
                                call.arg(due_arg(envelope.delay));
                            }
                            call.arg(&envelope.payload);
                        }
                        group.calls.push(call);
                    }
                }
            }
            offset += run.len();
        }
        let mut outcomes: Vec<Dispatched> = envelopes
            .iter()
            .map(|e| Dispatched::Queued(e.uuid))
            .collect();
        for group in &groups {
            let replies = self.invoke_all::<redis::Value>(&used, &group.calls).await?;
            for &(call, at) in &group.unique_at {
                // The holder's uuid; a lock someone else set by hand reads as the nil uuid.
                let holder = match &replies[call] {
                    redis::Value::BulkString(bytes) if !bytes.is_empty() => {
                        Some(String::from_utf8_lossy(bytes).parse().unwrap_or_default())
                    }
                    _ => None,
                };
                if let (Some(holder), Some(unique)) = (holder, &envelopes[at].unique) {
                    outcomes[at] = Dispatched::Duplicate(Duplicate {
                        job: envelopes[at].job.to_string(),
                        unique_id: unique.unique_id.clone(),
                        holder,
                    });
                }
            }
        }
        if !self.on_queued.is_empty() {
            self.report_queued(envelopes, &outcomes);
        }
        Ok(outcomes)
    }

    /// Envelopes ready to push: signed with the handle's signing key (`None`: there is none,
    /// and the envelopes are pushed as they are), each checked for its queue's name and its
    /// size.
    pub(crate) fn seal(&self, envelopes: &[Envelope]) -> Result<Option<Vec<Envelope>>> {
        let signed = match &self.config.signing_key {
            Some(key) => Some(sign_all(key, envelopes)?),
            None => None,
        };
        for envelope in signed.as_deref().unwrap_or(envelopes) {
            check_queue_name(&envelope.queue)?;
            if envelope.payload.len() > self.config.max_payload_bytes {
                return Err(Error::PayloadTooLarge {
                    job: envelope.job.to_string(),
                    size: envelope.payload.len(),
                    limit: self.config.max_payload_bytes,
                });
            }
        }
        Ok(signed)
    }

    /// Reserves up to `count` jobs of `queue`, after migrating due delayed jobs and expired
    /// reservations (at most `migrate_limit` of each in this call). Each reservation expires
    /// `retry_after` from now, by the server's clock.
    pub async fn pop(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        count: usize,
        migrate_limit: usize,
    ) -> Result<Popped> {
        let mut call = scripts::POP.key(&queue.ready);
        call.key(&queue.delayed)
            .key(&queue.reserved)
            .key(&queue.notify)
            .arg(seconds_arg(retry_after))
            .arg(count.max(1))
            .arg(migrate_limit.max(1));
        let (popped, next_due_us): (Vec<Vec<u8>>, i64) = self.invoke(&call).await?;
        let mut jobs = Vec::with_capacity(popped.len());
        let mut unreadable = Vec::new();
        for bytes in popped {
            match String::from_utf8(bytes) {
                Ok(job) => jobs.push(job),
                Err(err) => unreadable.push(err.into_bytes()),
            }
        }
        Ok(Popped {
            jobs,
            unreadable,
            next_due: u64::try_from(next_due_us).ok().map(Duration::from_micros),
        })
    }

    /// Deletes a finished job's reservation. Returns `false` when it was no longer held.
    pub async fn delete(&self, queue: &QueueKeys, reserved: &str) -> Result<bool> {
        Ok(self.delete_many(queue, &[reserved]).await? == 1)
    }

    /// Deletes finished jobs' reservations of one queue in one call; returns how many were
    /// still held.
    pub async fn delete_many(&self, queue: &QueueKeys, reserved: &[&str]) -> Result<u64> {
        if reserved.is_empty() {
            return Ok(0);
        }
        self.call(|mut conn| async move { conn.zrem(&queue.reserved, reserved).await })
            .await
    }

    /// Pushes the expiry of reservations still held to `retry_after` from now (server time);
    /// returns how many were still held. A live worker calls this for its running jobs, so a
    /// long job is never handed to a second worker.
    pub async fn extend(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        reserved: &[&str],
    ) -> Result<u64> {
        if reserved.is_empty() {
            return Ok(0);
        }
        let mut call = scripts::EXTEND.key(&queue.reserved);
        call.arg(seconds_arg(retry_after));
        for member in reserved {
            call.arg(*member);
        }
        self.invoke(&call).await
    }

    /// Moves a reserved job to the delayed set, due after `delay`. Returns `false`, changing
    /// nothing, when the reservation was no longer held.
    pub async fn release(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
    ) -> Result<bool> {
        self.release_with(queue, reserved, delay, None, &[]).await
    }

    /// [`RedisQueue::release`] putting `replacement` back instead of the reserved copy (a
    /// requeue that costs no attempt), and freeing `holds` in the same step. Returns `false`,
    /// changing nothing, when the reservation was no longer held.
    ///
    /// On a cluster the holds live in other slots: they are freed first, each by its owner, and
    /// the job is released after.
    pub async fn release_with(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
        replacement: Option<&str>,
        holds: &[Hold],
    ) -> Result<bool> {
        let holds = self.free_apart(holds).await?;
        let mut call = scripts::RELEASE.key(&queue.reserved);
        call.key(&queue.delayed)
            .key(&queue.notify)
            .arg(reserved)
            .arg(seconds_arg(delay))
            .arg(replacement.unwrap_or(""));
        add_holds(&mut call, holds);
        let released: u64 = self.invoke(&call).await?;
        Ok(released == 1)
    }

    /// Acknowledges a finished job and applies its `settlement` in the same step: frees what
    /// it held and pushes its chain's next link. Returns `false`, changing nothing, when the
    /// reservation was no longer held.
    ///
    /// On a cluster the holds live in other slots: they are freed first, each by its owner, and
    /// the reservation is removed last, so a crash between the two leaves a job that runs again
    /// rather than a lock that outlives its job.
    pub async fn complete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        settlement: &Settlement,
    ) -> Result<bool> {
        let holds = self.free_apart(&settlement.holds).await?;
        let mut effects = Effects::default();
        effects.holds(holds);
        match self.layout() {
            KeyLayout::Standalone => self.add_done_effects(settlement, &mut effects).await?,
            KeyLayout::Cluster => {
                if let Some(job) = settlement.job() {
                    self.done_apart(job, settlement).await?;
                }
            }
        }
        let mut call = scripts::COMPLETE.key(&queue.reserved);
        call.arg(reserved);
        effects.add_to(&mut call);
        let completed: u64 = self.invoke(&call).await?;
        if completed == 2 {
            tracing::warn!(
                queue = %queue.name,
                "the chain's next link changed while this link ran; the chain was left as it is"
            );
        }
        Ok(completed >= 1)
    }

    /// The effects of a job that is done, for `complete.lua` on one server: its chain's next
    /// link and its count in its batch.
    async fn add_done_effects(&self, settlement: &Settlement, effects: &mut Effects) -> Result<()> {
        if let Some(progress) = &settlement.chain {
            if let Some(step) = self.chain_done(progress).await? {
                let starts = step.starts;
                effects.chain_done(step);
                if let Some(batch) = starts {
                    let (step, parked, links) = self.batch_start_step(batch).await?;
                    let links = links
                        .into_iter()
                        .map(|link| (String::new(), link.clone(), self.queue_keys(&link.queue)))
                        .collect();
                    effects.batch_start(step, parked, links);
                }
            }
        }
        if let Some(progress) = &settlement.batch {
            // Links a link of the batch added to its chain join the batch; its chain pushes them.
            let joined: Vec<uuid::Uuid> = settlement
                .chain
                .iter()
                .flat_map(|chain| {
                    chain
                        .prepend
                        .iter()
                        .chain(&chain.append)
                        .map(|link| link.uuid)
                })
                .collect();
            let added = progress
                .added
                .iter()
                .map(|link| (link.encode(), link.clone(), self.queue_keys(&link.queue)))
                .collect();
            let step = self.batch_step(progress.id).await?;
            effects.batch_done(step, progress, added, &joined);
        }
        Ok(())
    }

    /// The effects of a job that failed for good, for `fail.lua` on one server: its chain's
    /// catch job and its count in its batch.
    async fn add_failed_effects(
        &self,
        settlement: &Settlement,
        effects: &mut Effects,
    ) -> Result<()> {
        if let Some(progress) = &settlement.chain {
            let id = progress.id.to_string();
            effects.chain_failed(
                self.keys.chain(&id),
                self.keys.chain_catch(&id),
                self.chain_catch(progress.id).await?,
                self.config.failed_max_age,
            );
        }
        if let Some(progress) = &settlement.batch {
            // The links after a failed link of the batch's chain will not run: they leave it.
            let leaving = match &settlement.chain {
                Some(chain) => self.chain_rest(chain.id).await?,
                None => Vec::new(),
            };
            effects.batch_failed(self.batch_step(progress.id).await?, progress, &leaving);
        }
        Ok(())
    }

    /// Renews the holds of running jobs for `lease` from now (Redis's clock); returns how many
    /// were still held.
    pub async fn renew_holds(&self, holds: &[Hold], lease: Duration) -> Result<u64> {
        let mut renewed = 0;
        for group in self.hold_groups(holds) {
            let mut call = scripts::LEASES.prepare_invoke();
            call.arg("renew").arg(lease.as_millis() as u64);
            add_holds(&mut call, group);
            renewed += self.invoke::<u64>(&call).await?;
        }
        Ok(renewed)
    }

    /// Frees holds, each only if its owner still holds it.
    pub async fn free_holds(&self, holds: &[Hold]) -> Result<()> {
        if let Some(recorder) = self.recorder() {
            recorder.free(holds);
            return Ok(());
        }
        for group in self.hold_groups(holds) {
            let mut call = scripts::LEASES.prepare_invoke();
            call.arg("free").arg(0);
            add_holds(&mut call, group);
            self.invoke::<u64>(&call).await?;
        }
        Ok(())
    }

    /// Holds in calls that each touch one slot: all of them together on one server, one by
    /// one on a cluster.
    fn hold_groups<'h>(&self, holds: &'h [Hold]) -> Vec<&'h [Hold]> {
        match (holds.is_empty(), self.layout()) {
            (true, _) => Vec::new(),
            (false, KeyLayout::Standalone) => vec![holds],
            (false, KeyLayout::Cluster) => holds.chunks(1).collect(),
        }
    }

    /// On a cluster, frees `holds` in calls of their own and returns none left for the settling
    /// script; on one server returns them all for it.
    async fn free_apart<'h>(&self, holds: &'h [Hold]) -> Result<&'h [Hold]> {
        match self.layout() {
            KeyLayout::Standalone => Ok(holds),
            KeyLayout::Cluster => {
                self.free_holds(holds).await?;
                Ok(&[])
            }
        }
    }

    /// Records a failed job, removing its reservation when `reserved` is given, and prunes the
    /// failed-job store. Returns `false`, changing nothing, when the reservation was no longer
    /// held.
    ///
    /// On one server this is one atomic script call. On a cluster the reservation and the
    /// failed-job store live in different slots, so it takes three calls, each within one slot,
    /// in an order that loses nothing: check that the reservation is held, record the failure,
    /// then remove the reservation. Should the worker die between the last two, the
    /// reservation expires and the job runs again; a second failure overwrites the same record.
    pub async fn fail(
        &self,
        queue: &QueueKeys,
        reserved: Option<&str>,
        record: &FailedJob,
    ) -> Result<bool> {
        self.fail_bytes(queue, reserved.unwrap_or("").as_bytes(), record)
            .await
    }

    /// [`RedisQueue::fail`] for a reserved copy given as bytes, which need not be UTF-8 (empty:
    /// a job that was never reserved).
    pub async fn fail_bytes(
        &self,
        queue: &QueueKeys,
        reserved: &[u8],
        record: &FailedJob,
    ) -> Result<bool> {
        self.fail_with(queue, reserved, record, &Settlement::default(), None)
            .await
    }

    /// [`RedisQueue::fail_bytes`] applying the job's `settlement` too (in the same step on one
    /// server; on a cluster its holds are freed before the failure is recorded): frees what
    /// it held and pushes its chain's catch job. For a job with a `failed()` hook, its call is
    /// owed in the same step as the record (`hook_claim`: how long the worker failing it has to
    /// run it before another one may; see [`RedisQueue::hook_done`]).
    pub async fn fail_with(
        &self,
        queue: &QueueKeys,
        reserved: &[u8],
        record: &FailedJob,
        settlement: &Settlement,
        hook_claim: Option<Duration>,
    ) -> Result<bool> {
        let layout = self.layout();
        let separate_removal = !reserved.is_empty() && layout == KeyLayout::Cluster;
        if separate_removal {
            let held: Option<f64> = self
                .call(|mut conn| async move { conn.zscore(&queue.reserved, reserved).await })
                .await?;
            if held.is_none() {
                return Ok(false);
            }
        }
        let holds = self.free_apart(&settlement.holds).await?;
        let mut effects = Effects::default();
        effects.holds(holds);
        match layout {
            KeyLayout::Standalone => self.add_failed_effects(settlement, &mut effects).await?,
            KeyLayout::Cluster => {
                if let Some(job) = settlement.job() {
                    self.failed_apart(job, settlement).await?;
                }
            }
        }
        let mut call = scripts::FAIL.key(self.keys.failed_jobs());
        call.key(self.keys.failed_jobs_index())
            .key(self.keys.failed_hooks());
        match layout {
            KeyLayout::Standalone => call.key(&queue.reserved).arg(reserved),
            KeyLayout::Cluster => call.arg(""),
        };
        call.arg(&record.uuid)
            .arg(record.to_json())
            .arg(self.config.failed_max_jobs)
            .arg(self.config.failed_max_age.as_secs())
            .arg(hook_claim.map_or(String::new(), seconds_arg));
        effects.add_to(&mut call);
        let recorded: u64 = self.invoke(&call).await?;
        if separate_removal {
            self.call(
                |mut conn| async move { conn.zrem::<_, _, ()>(&queue.reserved, reserved).await },
            )
            .await?;
        }
        Ok(recorded == 1)
    }

    /// Reports the `failed()` hook of the failed job `uuid` done: no worker runs it again.
    pub async fn hook_done(&self, uuid: &str) -> Result<()> {
        let key = &self.keys.failed_hooks();
        self.call(|mut conn| async move { conn.zrem::<_, _, ()>(key, uuid).await })
            .await
    }

    /// Whether any owed `failed()` hook's time has come, by Redis's clock: the earliest entry
    /// and the server's time, read in one round trip.
    pub async fn hooks_due(&self) -> Result<bool> {
        let mut pipe = redis::pipe();
        pipe.zrange_withscores(self.keys.failed_hooks(), 0, 0)
            .cmd("TIME");
        let (first, (seconds, micros)): (Vec<(String, f64)>, (u64, u64)) = self
            .call(|mut conn| {
                let pipe = &pipe;
                async move { pipe.query_async(&mut conn).await }
            })
            .await?;
        Ok(first
            .first()
            .is_some_and(|(_, due)| *due <= seconds as f64 + micros as f64 / 1e6))
    }

    /// Takes up to `limit` `failed()` hooks that were owed and not reported done in time (their
    /// worker died), each for `claim` before another worker may take it; returns the uuids of
    /// their failed jobs.
    pub async fn claim_hooks(&self, claim: Duration, limit: usize) -> Result<Vec<String>> {
        let mut call = scripts::CLAIM_HOOKS.key(self.keys.failed_hooks());
        call.arg(seconds_arg(claim)).arg(limit.max(1));
        self.invoke(&call).await
    }

    /// The sizes of a queue.
    pub async fn size(&self, queue: &str) -> Result<QueueSize> {
        let keys = self.queue_keys(queue);
        let mut pipe = redis::pipe();
        pipe.llen(&keys.ready)
            .zcard(&keys.delayed)
            .zcard(&keys.reserved);
        let (ready, delayed, reserved) = self
            .call(|mut conn| {
                let pipe = &pipe;
                async move { pipe.query_async(&mut conn).await }
            })
            .await?;
        Ok(QueueSize {
            ready,
            delayed,
            reserved,
        })
    }

    /// Deletes every job of a queue; returns how many there were.
    pub async fn clear(&self, queue: &str) -> Result<u64> {
        check_queue_name(queue)?;
        let keys = self.queue_keys(queue);
        let mut call = scripts::CLEAR.key(&keys.ready);
        call.key(&keys.delayed)
            .key(&keys.reserved)
            .key(&keys.notify);
        self.invoke(&call).await
    }

    /// The failed-job record of `uuid`, if the store has it.
    pub async fn failed_job(&self, uuid: &str) -> Result<Option<FailedJob>> {
        let key = &self.keys.failed_jobs();
        let json: Option<String> = self
            .call(|mut conn| async move { conn.hget(key, uuid).await })
            .await?;
        Ok(json.and_then(|json| serde_json::from_str(&json).ok()))
    }

    /// Failed-job records, newest first, at most `limit`.
    pub async fn failed_jobs(&self, limit: usize) -> Result<Vec<FailedJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let index = &self.keys.failed_jobs_index();
        let uuids: Vec<String> = self
            .call(|mut conn| async move { conn.zrevrange(index, 0, limit as isize - 1).await })
            .await?;
        if uuids.is_empty() {
            return Ok(Vec::new());
        }
        let mut hmget = redis::cmd("HMGET");
        hmget.arg(self.keys.failed_jobs()).arg(&uuids);
        let records: Vec<Option<String>> = self
            .call(|mut conn| {
                let hmget = &hmget;
                async move { hmget.query_async(&mut conn).await }
            })
            .await?;
        Ok(records
            .into_iter()
            .flatten()
            .filter_map(|json| serde_json::from_str(&json).ok())
            .collect())
    }

    /// A connection for commands of one's own, sharing this handle's multiplexed connection.
    /// On a cluster, each command goes to the node that owns its keys.
    pub fn connection(&self) -> Connection {
        self.conn.clone()
    }

    /// Runs one Redis call under the command timeout.
    pub async fn timed<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.config.command_timeout, call).await {
            Ok(result) => result.map_err(Error::from),
            Err(_) => Err(Error::Timeout(self.config.command_timeout)),
        }
    }

    /// Runs one Redis call under the command timeout. A call that finds the connection refused
    /// was never sent, and may have met only the kept failure of a reconnection made while
    /// Redis was down; that failure starts a new reconnection. Such a call is therefore made
    /// once more, on the new connection, within the same timeout, so that the first call after
    /// Redis came back succeeds. If that one does not answer in time, the refusal is reported.
    pub(crate) async fn call<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + self.config.command_timeout;
        let timed_out = || Error::Timeout(self.config.command_timeout);
        match tokio::time::timeout_at(deadline, call(self.conn.clone())).await {
            Ok(Err(refused)) if refused.is_connection_refusal() => {
                match tokio::time::timeout_at(deadline, call(self.conn.clone())).await {
                    Ok(result) => result.map_err(Error::from),
                    Err(_) => Err(Error::from(refused)),
                }
            }
            Ok(result) => result.map_err(Error::from),
            Err(_) => Err(timed_out()),
        }
    }

    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> Result<T> {
        self.call(|mut conn| async move { call.invoke_async(&mut conn).await })
            .await
    }

    /// Sends script calls in one pipeline, preceded by `SCRIPT LOAD` of the `scripts` they
    /// use, so that none of them meets `NOSCRIPT` (a restarted or flushed server). Returns
    /// each call's reply, in order.
    ///
    /// A pipeline's `EVALSHA` does not load its script by itself, and sending the pipeline
    /// again after a `NOSCRIPT` would run the calls that had succeeded a second time.
    pub(crate) async fn invoke_all<T: redis::FromRedisValue>(
        &self,
        scripts: &[&redis::Script],
        calls: &[ScriptInvocation<'_>],
    ) -> Result<Vec<T>> {
        match calls {
            [] => return Ok(Vec::new()),
            [single] => return self.invoke::<T>(single).await.map(|reply| vec![reply]),
            _ => {}
        }
        let mut pipe = Pipeline::with_capacity(scripts.len() + calls.len());
        for script in scripts {
            pipe.load_script(script).ignore();
        }
        for call in calls {
            pipe.invoke_script(call);
        }
        let pipe = &pipe;
        self.call(|mut conn| async move { pipe.query_async::<Vec<T>>(&mut conn).await })
            .await
    }
}

/// Adds holds to a settling script's call: their keys after its own, their owners after its
/// own arguments.
fn add_holds(call: &mut ScriptInvocation<'_>, holds: &[Hold]) {
    for hold in holds {
        call.key(&hold.key);
    }
    for hold in holds {
        call.arg(&hold.owner);
    }
}

/// Seconds with a millisecond fraction, as the scripts take them.
fn seconds_arg(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// A delayed job's due argument for `later.lua`: a delay from the server's now, or `@` and
/// the unix time of a job dispatched to run at a point in time.
pub(crate) fn due_arg(delay: Option<Delay>) -> String {
    match delay {
        Some(Delay::At(at)) => format!("@{}.{:03}", at.timestamp(), at.timestamp_subsec_millis()),
        Some(Delay::After(delay)) => seconds_arg(delay),
        None => seconds_arg(Duration::ZERO),
    }
}

/// The delay of a due argument of `later.lua` ([`due_arg`]); `None` for `""`, a ready job.
pub(crate) fn delay_from_due(due: &str) -> Option<Delay> {
    if due.is_empty() {
        return None;
    }
    let seconds = |text: &str| {
        text.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
    };
    match due.strip_prefix('@') {
        Some(at) => {
            let millis = (seconds(at)? * 1000.0).round() as i64;
            Some(Delay::At(chrono::DateTime::from_timestamp_millis(millis)?))
        }
        None => Some(Delay::After(Duration::from_secs_f64(seconds(due)?))),
    }
}

/// The script calls of one pipeline, and which of them push unique jobs (call index,
/// envelope index).
struct Group<'a> {
    name: &'a str,
    calls: Vec<ScriptInvocation<'static>>,
    unique_at: Vec<(usize, usize)>,
}

impl<'a> Group<'a> {
    fn new(name: &'a str) -> Self {
        Group {
            name,
            calls: Vec::new(),
            unique_at: Vec::new(),
        }
    }
}

/// Splits envelopes into runs of the same queue and kind (ready or delayed), keeping order; a
/// unique or debounced job is a run of its own.
fn runs(envelopes: &[Envelope]) -> impl Iterator<Item = &[Envelope]> {
    let plain = |e: &Envelope| e.unique.is_none() && e.debounce.is_none();
    envelopes.chunk_by(move |a, b| {
        a.queue == b.queue && a.delay.is_some() == b.delay.is_some() && plain(a) && plain(b)
    })
}

/// Envelopes whose payloads carry their signature under `key`.
fn sign_all(key: &SigningKey, envelopes: &[Envelope]) -> Result<Vec<Envelope>> {
    envelopes
        .iter()
        .map(|envelope| {
            let mut payload =
                Payload::from_json(&envelope.payload).map_err(|source| Error::Unsignable {
                    job: envelope.job.to_string(),
                    source,
                })?;
            payload.signature = Some(key.sign(&payload));
            Ok(Envelope {
                uuid: envelope.uuid,
                job: envelope.job.clone(),
                queue: envelope.queue.clone(),
                payload: payload.to_json(),
                delay: envelope.delay,
                unique: envelope.unique.clone(),
                debounce: envelope.debounce.clone(),
            })
        })
        .collect()
}
