//! A private Redis Cluster of three primaries on free loopback ports, for the cluster tests.
//!
//! Each node is a [`TestRedis`] started with `cluster-enabled yes` and its cluster files in its
//! own directory; `redis-cli --cluster create` assigns the slots. Dropping the cluster stops
//! every node.
//!
//! ```no_run
//! # async fn demo() {
//! let cluster = tests::cluster::TestCluster::start();
//! let queue = cluster.queue(); // a RedisQueue on redis+cluster://...
//! # let _ = queue;
//! # }
//! ```

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use redjob::queue::keys;
use redjob::{QueueConfig, RedisQueue};

use crate::TestRedis;

/// How many primaries a test cluster has.
pub const NODES: usize = 3;

/// The nodes' `cluster-node-timeout`, in milliseconds.
const NODE_TIMEOUT_MS: u32 = 5000;

/// How long `TestCluster::start` waits for every node to report `cluster_state:ok`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A Redis Cluster of [`NODES`] primaries, with or without replicas, on loopback ports.
pub struct TestCluster {
    nodes: Vec<TestRedis>,
    url: String,
}

impl TestCluster {
    /// Starts the nodes, creates the cluster, and waits until every node reports
    /// `cluster_state:ok` and knows all nodes. Panics with the reason when it cannot.
    pub fn start() -> TestCluster {
        TestCluster::start_with_replicas(0)
    }

    /// Starts a cluster of [`NODES`] primaries with `replicas` replicas each, as
    /// [`TestCluster::start`] does; [`TestCluster::nodes`] lists primaries and replicas.
    pub fn start_with_replicas(replicas: usize) -> TestCluster {
        let nodes: Vec<TestRedis> = (0..NODES * (1 + replicas))
            .map(|_| TestRedis::start_cluster_node(NODE_TIMEOUT_MS))
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new(redis_cli())
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .unwrap_or_else(|err| panic!("cannot run redis-cli: {err}"));
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let cluster = TestCluster {
            url: format!("redis+cluster://{}/", addresses[..NODES].join(",")),
            nodes,
        };
        cluster.wait_until_ready();
        cluster.wait_until_replicated(replicas);
        cluster
    }

    /// Waits until every primary has `replicas` replicas online.
    fn wait_until_replicated(&self, replicas: usize) {
        if replicas == 0 {
            return;
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        let online = |node: &TestRedis| {
            let info = replication_info(node);
            info.contains("role:slave") || info.matches("state=online").count() >= replicas
        };
        while !self.nodes.iter().all(online) {
            assert!(
                Instant::now() < deadline,
                "the replicas did not come online within {READY_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The ports of the nodes that are replicas.
    pub fn replica_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|node| replication_info(node).contains("role:slave"))
            .map(TestRedis::port)
            .collect()
    }

    /// Kills the node on `port` with SIGKILL.
    pub fn kill_node(&mut self, port: u16) {
        let node = self.nodes.iter_mut().find(|node| node.port() == port);
        node.expect("a node on that port").kill();
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        for node in &self.nodes {
            loop {
                let info = cluster_info(node);
                let ready = info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.contains(&format!("cluster_known_nodes:{}", self.nodes.len()));
                if ready {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the cluster did not become ready within {READY_TIMEOUT:?}; node {} says:\n{info}",
                    node.port()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The cluster's URL, `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The nodes, each a server of its own.
    pub fn nodes(&self) -> &[TestRedis] {
        &self.nodes
    }

    /// A queue handle on the cluster, with default settings.
    pub fn queue(&self) -> RedisQueue {
        self.queue_with(QueueConfig {
            prefix: String::new(),
            ..QueueConfig::default()
        })
    }

    /// A queue handle on the cluster, with the given settings.
    pub fn queue_with(&self, config: QueueConfig) -> RedisQueue {
        RedisQueue::with_config(&self.url, config).expect("the test cluster's URL is valid")
    }

    /// Every key of the cluster, each with the port of the node that holds it, but for the
    /// records the example jobs write for the tests to read (`examples:*`) and the state
    /// workers publish for the operators' tools (heartbeats, per-minute metrics, recent
    /// jobs), which outlives the jobs it tells of.
    pub async fn keys_by_node(&self) -> Vec<(u16, String)> {
        let mut all = Vec::new();
        for node in &self.nodes {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut node.conn().await)
                .await
                .expect("KEYS answers");
            all.extend(
                keys.into_iter()
                    .filter(|key| !key.starts_with(EXAMPLES_PREFIX) && !published_by_workers(key))
                    .map(|key| (node.port(), key)),
            );
        }
        all.sort();
        all
    }

    /// Every key of the cluster, without its node, as [`TestCluster::keys_by_node`] finds them.
    pub async fn key_names(&self) -> Vec<String> {
        self.keys_by_node()
            .await
            .into_iter()
            .map(|(_, key)| key)
            .collect()
    }
}

/// The prefix of the keys the example jobs write their records under.
const EXAMPLES_PREFIX: &str = "examples:";

/// Whether `key` (without a key prefix) is state a worker publishes for the operators' tools:
/// its heartbeat record, the set of live workers, a minute's job counters, a queue's recent
/// jobs.
fn published_by_workers(key: &str) -> bool {
    let unprefixed = keys::Keys::default();
    key == unprefixed.workers()
        || [
            unprefixed.metrics_pattern().trim_end_matches('*'),
            &unprefixed.worker(""),
            &unprefixed.recent(""),
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("url", &self.url)
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// `CLUSTER INFO` of one node, read with a blocking connection.
fn cluster_info(node: &TestRedis) -> String {
    let reply = node
        .client()
        .get_connection_with_timeout(Duration::from_secs(2))
        .and_then(|mut conn| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut conn));
    reply.unwrap_or_else(|err| format!("no answer: {err}"))
}

fn replication_info(node: &TestRedis) -> String {
    let reply = node
        .client()
        .get_connection_with_timeout(Duration::from_secs(2))
        .and_then(|mut conn| {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut conn)
        });
    reply.unwrap_or_else(|err| format!("no answer: {err}"))
}

/// `$REDIS_CLI` when set, else `redis-cli` beside the `redis-server` in use, else on the `PATH`.
fn redis_cli() -> PathBuf {
    if let Some(path) = std::env::var_os("REDIS_CLI") {
        return path.into();
    }
    if let Some(server) = std::env::var_os("REDIS_SERVER") {
        let beside = PathBuf::from(server).with_file_name("redis-cli");
        if beside.exists() {
            return beside;
        }
    }
    PathBuf::from("redis-cli")
}
