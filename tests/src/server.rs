//! One test on both key layouts: a single Redis server ([`TestRedis`]) and a Redis Cluster of
//! three primaries ([`TestCluster`]), behind one [`Server`] type.
//!
//! A test written once against [`Server`] takes its key names from the layout
//! ([`Server::keys`], [`Server::queue_keys`]: `queues:emails` on one server,
//! `queues:{emails}` on a cluster) and its connection from the queue handle, which routes each
//! command to the node that owns its key. [`on_both_layouts!`](crate::on_both_layouts) turns
//! it into two tests, `<name>::one_server` and `<name>::cluster`, so that a failure names the
//! layout it failed on.
//!
//! ```no_run
//! use redis::AsyncCommands;
//! use tests::Server;
//!
//! async fn a_paused_queue_is_listed(redis: Server) {
//!     let mut conn = redis.conn().await;
//!     let _: () = conn.sadd(redis.keys().paused(), "emails").await.unwrap();
//!     let paused = redjob::admin::Admin::new(redis.queue()).paused().await.unwrap();
//!     assert_eq!(paused, ["emails"]);
//! }
//! tests::on_both_layouts!(a_paused_queue_is_listed);
//! # fn main() {}
//! ```

use redjob::queue::connection::Connection;
use redjob::queue::keys::{KeyLayout, Keys, QueueKeys};
use redjob::RedisQueue;

use crate::cluster::TestCluster;
use crate::TestRedis;

/// A private Redis under test: one server, or a cluster of three primaries.
#[derive(Debug)]
pub enum Server {
    /// One `redis-server`: keys as Laravel names them (`queues:emails`, `failed_jobs`).
    One(TestRedis),
    /// A Redis Cluster: a queue's keys carry its name as a hash tag (`queues:{emails}`), the
    /// failed-job store is `{failed_jobs}`.
    Cluster(TestCluster),
}

impl Server {
    /// Starts a Redis of the given layout: one server for [`KeyLayout::Standalone`], a cluster
    /// for [`KeyLayout::Cluster`].
    pub fn start(layout: KeyLayout) -> Server {
        match layout {
            KeyLayout::Standalone => Server::One(TestRedis::start()),
            KeyLayout::Cluster => Server::Cluster(TestCluster::start()),
        }
    }

    /// A new single server.
    pub fn one() -> Server {
        Server::start(KeyLayout::Standalone)
    }

    /// A new cluster of three primaries.
    pub fn cluster() -> Server {
        Server::start(KeyLayout::Cluster)
    }

    /// The key layout of this Redis.
    pub fn layout(&self) -> KeyLayout {
        match self {
            Server::One(_) => KeyLayout::Standalone,
            Server::Cluster(_) => KeyLayout::Cluster,
        }
    }

    /// The URL the workers, `jobsctl` and the dashboard are given: `redis://127.0.0.1:PORT/`
    /// or `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/`.
    pub fn url(&self) -> &str {
        match self {
            Server::One(redis) => redis.url(),
            Server::Cluster(cluster) => cluster.url(),
        }
    }

    /// A queue handle with default settings (no key prefix).
    pub fn queue(&self) -> RedisQueue {
        match self {
            Server::One(redis) => redis.queue(),
            Server::Cluster(cluster) => cluster.queue(),
        }
    }

    /// Every key name of this layout, without a prefix: those of [`Server::queue`]'s handle.
    pub fn keys(&self) -> Keys {
        self.queue().keys().clone()
    }

    /// The keys of the queue `name` in this layout.
    pub fn queue_keys(&self, name: &str) -> QueueKeys {
        self.keys().queue(name)
    }

    /// A connection for inspecting and arranging Redis state, usable with
    /// `redis::AsyncCommands`: on a cluster each command goes to the node of its key.
    pub async fn conn(&self) -> Connection {
        self.queue().connection()
    }

    /// The Redis clock (`TIME`; on a cluster, of one node: they share this machine's clock),
    /// in seconds since the epoch with microseconds.
    pub async fn server_time(&self) -> f64 {
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut self.conn().await)
            .await
            .expect("TIME answers");
        secs as f64 + micros as f64 / 1e6
    }
}

/// What the shared set-ups ([`crate::scenarios`]) need of a Redis under test, whichever kind
/// it is: the URL to give a worker and a queue handle to dispatch through.
pub trait RedisUnderTest {
    /// The URL a worker process is started with.
    fn url(&self) -> &str;
    /// A queue handle with default settings.
    fn queue(&self) -> RedisQueue;
}

impl RedisUnderTest for TestRedis {
    fn url(&self) -> &str {
        TestRedis::url(self)
    }
    fn queue(&self) -> RedisQueue {
        TestRedis::queue(self)
    }
}

impl RedisUnderTest for TestCluster {
    fn url(&self) -> &str {
        TestCluster::url(self)
    }
    fn queue(&self) -> RedisQueue {
        TestCluster::queue(self)
    }
}

impl RedisUnderTest for Server {
    fn url(&self) -> &str {
        Server::url(self)
    }
    fn queue(&self) -> RedisQueue {
        Server::queue(self)
    }
}

/// Makes two tests of the async function `name(redis: Server)`: `name::one_server`, run on a
/// new single server, and `name::cluster`, run on a new Redis Cluster. Each is a
/// `#[tokio::test]`, or the test attribute given before the name.
///
/// ```no_run
/// async fn jobs_run(redis: tests::Server) {
///     # let _ = redis;
///     // ...
/// }
/// tests::on_both_layouts!(jobs_run);
///
/// async fn many_jobs_run(redis: tests::Server) {
///     # let _ = redis;
///     // ...
/// }
/// tests::on_both_layouts!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] many_jobs_run);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! on_both_layouts {
    ($name:ident) => {
        $crate::on_both_layouts!(
            #[tokio::test]
            $name
        );
    };
    (#[$test:meta] $name:ident) => {
        mod $name {
            #[$test]
            async fn one_server() {
                super::$name($crate::Server::one()).await
            }

            #[$test]
            async fn cluster() {
                super::$name($crate::Server::cluster()).await
            }
        }
    };
}
