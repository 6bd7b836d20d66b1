//! [`RedisQueue`]: the handle to the queues on one Redis server or a Redis Cluster, and how it
//! is opened. What it does lives in the files beside this one, one role each.

use redis::aio::ConnectionManager;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::queue::config::QueueConfig;
use crate::queue::connection::{with_timeouts, Connection, Target};
use crate::queue::extensions::Extensions;
use crate::queue::keys::{KeyLayout, Keys, QueueKeys};
use crate::queue::queued::{Queued, QueuedListener};
use crate::queue::sentinel::SentinelConnection;
use crate::queue::url::redis_url_from_env;

/// A handle to the queues on one Redis server or on a Redis Cluster. Cheap to clone: clones
/// share one multiplexed, self-reconnecting connection (one per node on a cluster).
///
/// A `redis+cluster://host:port,host:port/` URL names a cluster by one or more of its nodes;
/// there every key of a queue carries a hash tag ([`KeyLayout::Cluster`]). Any other URL names
/// one server, whose keys are exactly Laravel's.
///
/// ```no_run
/// # async fn demo() -> Result<(), redjob::Error> {
/// use redjob::RedisQueue;
/// let queue = RedisQueue::open("redis://127.0.0.1:6379")?;
/// println!("{} jobs waiting", queue.size("default").await?.total());
/// let cluster = RedisQueue::open("redis+cluster://10.0.0.1:7000,10.0.0.2:7000/")?;
/// println!("{} jobs waiting", cluster.size("default").await?.total());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisQueue {
    pub(crate) on_queued: Arc<[QueuedListener]>,
    pub(crate) conn: Connection,
    // Shared: a handle is cloned for every job a worker runs, and a client is costly to copy.
    target: Arc<Target>,
    pub(crate) config: Arc<QueueConfig>,
    keys: Arc<Keys>,
    extensions: Extensions,
}

impl std::fmt::Debug for RedisQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisQueue")
            .field("target", &self.target)
            .field("config", &self.config)
            .finish()
    }
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
        Self::lazily_connected(Arc::new(target), Arc::new(config), Extensions::default())
    }

    /// A handle to the Redis named by `REDIS_URL`, or
    /// [`DEFAULT_REDIS_URL`](crate::queue::DEFAULT_REDIS_URL).
    pub fn from_env() -> Result<Self> {
        Self::open(&redis_url_from_env())
    }

    /// A handle to the same server (or cluster) with the same settings and extensions but a
    /// connection of its own, made and driven by the Tokio runtime this is called in
    /// ([`Error::NoRuntime`] outside one). A thread with a runtime of its own reaches Redis
    /// through it even while the runtime that drives this handle's connection is busy or
    /// blocked.
    pub fn with_own_connection(&self) -> Result<Self> {
        Self::lazily_connected(
            self.target.clone(),
            self.config.clone(),
            self.extensions.clone(),
        )
    }

    fn lazily_connected(
        target: Arc<Target>,
        config: Arc<QueueConfig>,
        extensions: Extensions,
    ) -> Result<Self> {
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
            Target::Sentinel(target) => {
                let timeouts = with_timeouts(config.command_timeout, config.command_timeout);
                Connection::Sentinel(SentinelConnection::lazy(target.clone(), timeouts))
            }
            Target::Cluster(client) => {
                let cluster_config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(config.command_timeout)
                    .set_response_timeout(config.command_timeout);
                Connection::Cluster(client.get_pending_async_connection_with_config(cluster_config))
            }
            Target::Offline => Connection::Offline,
        };
        Ok(Self::assemble(conn, target, config, extensions))
    }

    /// This handle with its commands sent through `conn` instead.
    pub(crate) fn on_connection(&self, conn: Connection) -> Self {
        RedisQueue {
            conn,
            ..self.clone()
        }
    }

    /// A handle that talks to no Redis: what it pushes goes to the
    /// [`Offline`](crate::queue::offline::Offline) sink its extensions hold (a fake queue's).
    pub(crate) fn offline(extensions: Extensions) -> Self {
        let config = QueueConfig {
            signing_key: None,
            tls_ca_file: None,
            laravel_key: None,
            ..QueueConfig::default()
        };
        let target = Arc::new(Target::Offline);
        Self::assemble(Connection::Offline, target, Arc::new(config), extensions)
    }

    fn assemble(
        conn: Connection,
        target: Arc<Target>,
        config: Arc<QueueConfig>,
        extensions: Extensions,
    ) -> Self {
        let keys = Arc::new(Keys::new(target.layout(), config.prefix.clone()));
        RedisQueue {
            on_queued: Arc::new([]),
            conn,
            target,
            config,
            keys,
            extensions,
        }
    }

    /// Whether this handle talks to no Redis: a fake queue's ([`crate::testing`]), which
    /// records dispatches instead.
    pub fn is_offline(&self) -> bool {
        matches!(*self.target, Target::Offline)
    }

    /// This handle, calling `listener` for every job it pushes, once the push is done (a
    /// duplicate of a unique job is not pushed, and not reported). The listener runs on the
    /// dispatching task: keep it short. A panic in it is caught and logged; the dispatch
    /// succeeds all the same.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), redjob::Error> {
    /// let queue = redjob::RedisQueue::open("redis://127.0.0.1:6379")?
    ///     .on_queued(|queued| println!("queued {} on {}", queued.job, queued.queue));
    /// # Ok(()) }
    /// ```
    pub fn on_queued(mut self, listener: impl Fn(&Queued<'_>) + Send + Sync + 'static) -> Self {
        let mut listeners = self.on_queued.to_vec();
        listeners.push(Arc::new(listener));
        self.on_queued = listeners.into();
        self
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

    /// State that capabilities keep on this handle, one value per type, shared by its clones
    /// (and by [`RedisQueue::with_own_connection`]'s handles).
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// A connection for commands of one's own, sharing this handle's multiplexed connection.
    /// On a cluster, each command goes to the node that owns its keys.
    pub fn connection(&self) -> Connection {
        self.conn.clone()
    }
}
