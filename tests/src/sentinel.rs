//! A private Redis Sentinel deployment on loopback ports: one primary, replicas of it, and three
//! sentinels watching it as `mymaster`, each started by this harness and stopped when dropped.
//! A test kills the primary with SIGKILL ([`TestSentinel::kill_primary`]), waits for the
//! sentinels to elect a replica ([`TestSentinel::wait_for_new_primary`]), and restarts the old
//! one as a replica of the new primary ([`TestSentinel::restart`]).
//!
//! The sentinels are Debian's `redis-sentinel` when installed, else `redis-server --sentinel`
//! (the same program). They are asked through the `redis` crate's plain connection.

use std::fs::File;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_server::{free_port, TestRedis};
use crate::temp_dir::TempDir;
use redjob::{QueueConfig, RedisQueue};

/// The name the sentinels know the primary by.
pub const SERVICE: &str = "mymaster";
/// How long a sentinel waits without an answer before it calls the primary down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// One primary, its replicas and three sentinels.
pub struct TestSentinel {
    /// The data servers, the primary first at the start; a failover changes which is which.
    servers: Vec<TestRedis>,
    sentinels: Vec<SentinelProcess>,
}

struct SentinelProcess {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TestSentinel {
    /// Starts a primary, `replicas` replicas of it and three sentinels, and waits until every
    /// sentinel knows the primary and its replicas.
    pub fn start(replicas: usize) -> TestSentinel {
        // A replica that must sync in full after a failover (it had more of the old primary's
        // stream than the new one) does so at once, not after the default 5 s of
        // `repl-diskless-sync-delay`.
        const SYNC_AT_ONCE: [&str; 2] = ["--repl-diskless-sync-delay", "0"];
        let primary = TestRedis::start_with(&SYNC_AT_ONCE);
        let port = primary.port().to_string();
        let mut servers = vec![primary];
        for _ in 0..replicas {
            let mut options = vec!["--replicaof", "127.0.0.1", &port];
            options.extend(SYNC_AT_ONCE);
            servers.push(TestRedis::start_with(&options));
        }
        let sentinels = (0..3).map(|_| start_sentinel(servers[0].port())).collect();
        let deployment = TestSentinel { servers, sentinels };
        deployment.wait_until(
            Duration::from_secs(30),
            "the sentinels see every replica",
            |d| {
                d.sentinels
                    .iter()
                    .all(|s| replicas_of(s.port).is_some_and(|known| known >= replicas))
            },
        );
        for replica in deployment.servers[1..].iter().map(TestRedis::port) {
            deployment.wait_for_replica(replica, Duration::from_secs(30));
        }
        // As the primary sees them: a replica counts for WAIT once the primary has it online.
        deployment.wait_until(
            Duration::from_secs(30),
            "the primary has every replica online",
            |d| {
                replication(d.servers[0].port())
                    .matches("state=online")
                    .count()
                    >= replicas
            },
        );
        deployment
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`, the URL other
    /// clients take for a Sentinel-managed primary.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
    }

    /// A queue handle through the sentinels, with `config` (its key prefix cleared).
    pub fn queue_with(&self, config: QueueConfig) -> RedisQueue {
        let config = QueueConfig {
            prefix: String::new(),
            tls_ca_file: None,
            ..config
        };
        RedisQueue::with_config(&self.url(), config).expect("the sentinel URL is valid")
    }

    /// The sentinels' logs (debugging).
    pub fn logs(&self) -> String {
        self.sentinels
            .iter()
            .map(|s| {
                format!(
                    "--- sentinel {}\n{}",
                    s.port,
                    std::fs::read_to_string(s._dir.path().join("sentinel.log")).unwrap_or_default()
                )
            })
            .collect()
    }

    /// The ports of the sentinels.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The data server on `port`.
    pub fn server(&self, port: u16) -> &TestRedis {
        self.servers
            .iter()
            .find(|server| server.port() == port)
            .expect("a data server on that port")
    }

    /// The data server on `port`, to freeze and resume.
    pub fn server_mut(&mut self, port: u16) -> &mut TestRedis {
        self.servers
            .iter_mut()
            .find(|server| server.port() == port)
            .expect("a data server on that port")
    }

    /// Waits until the server on `port` is a replica of the primary the sentinels name, with
    /// its link up: ready to be elected in the next failover.
    pub fn wait_for_replica(&self, port: u16, timeout: Duration) {
        self.wait_until(timeout, "the server is an online replica", |d| {
            let Some(primary) = d.agreed_primary() else {
                return false;
            };
            let info = replication(port);
            info.contains("role:slave")
                && info.contains(&format!("master_port:{primary}"))
                && info.contains("master_link_status:up")
        });
    }

    /// Kills the primary with SIGKILL; returns its port.
    /// The primary is the server every sentinel names, and which answers `ROLE` as one.
    pub fn kill_primary(&mut self) -> u16 {
        let port = self
            .agreed_primary()
            .expect("every sentinel names the same primary");
        assert_eq!(
            role(port),
            "master",
            "the server the sentinels name answers as the primary"
        );
        self.server_mut(port).kill();
        port
    }

    /// Waits until every sentinel names the same primary, other than the one on `old_port`;
    /// returns its port. (A sentinel that has not heard of the election yet would make the
    /// old primary, restarted, the primary again.)
    pub fn wait_for_new_primary(&self, old_port: u16, timeout: Duration) -> u16 {
        self.wait_until(timeout, "every sentinel names the new primary", |d| {
            d.agreed_primary().is_some_and(|port| port != old_port)
        });
        self.agreed_primary().expect("a new primary")
    }

    /// The primary's port when every sentinel names the same one.
    pub fn agreed_primary(&self) -> Option<u16> {
        let named: Vec<Option<u16>> = self.sentinels.iter().map(|s| primary_of(s.port)).collect();
        let first = named.first().copied().flatten()?;
        named
            .iter()
            .all(|port| *port == Some(first))
            .then_some(first)
    }

    /// Makes a replica the primary by hand, behind the sentinels' backs, the way a demotion
    /// they did not see would look to a client: the replica on `new_port` stops replicating,
    /// the old primary becomes its replica (its clients stay connected, and their writes are
    /// refused with `READONLY`), and every sentinel is told to watch the new primary instead.
    pub fn demote_primary_by_hand(&self, new_port: u16) -> u16 {
        let old_port = self
            .agreed_primary()
            .expect("the sentinels agree on a primary");
        let query = |port: u16, cmd: &mut redis::Cmd| run::<redis::Value>(port, cmd);
        query(new_port, redis::cmd("REPLICAOF").arg("NO").arg("ONE"));
        query(
            old_port,
            redis::cmd("REPLICAOF").arg("127.0.0.1").arg(new_port),
        );
        for sentinel in &self.sentinels {
            query(
                sentinel.port,
                redis::cmd("SENTINEL").arg("REMOVE").arg(SERVICE),
            );
            query(
                sentinel.port,
                redis::cmd("SENTINEL")
                    .arg("MONITOR")
                    .arg(SERVICE)
                    .arg("127.0.0.1")
                    .arg(new_port)
                    .arg(2),
            );
            query(
                sentinel.port,
                redis::cmd("SENTINEL")
                    .arg("SET")
                    .arg(SERVICE)
                    .arg("down-after-milliseconds")
                    .arg(DOWN_AFTER.as_millis() as u64),
            );
        }
        old_port
    }

    /// The payloads waiting in `queues:<queue>` on the data server on `port`.
    pub fn waiting_on(&self, port: u16, queue: &str) -> Vec<String> {
        let lrange = redis::cmd("LRANGE")
            .arg(format!("queues:{queue}"))
            .arg(0)
            .arg(-1)
            .to_owned();
        run(port, &lrange)
    }

    /// The ports of the data servers, the primary's among them.
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.iter().map(|s| s.port()).collect()
    }

    /// Starts the server on `port` again (killed earlier) as a replica of the primary every
    /// sentinel names, as an operator or an orchestrator brings a failed primary back. (The
    /// sentinels would make it one by themselves, but only once they have seen it answer as a
    /// primary for eight seconds after their next `INFO`, ten seconds apart.)
    pub fn restart(&mut self, port: u16) {
        let primary = self
            .agreed_primary()
            .expect("the sentinels agree on a primary");
        self.server_mut(port).restart();
        run::<()>(port, redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary));
    }

    fn wait_until(&self, timeout: Duration, what: &str, condition: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while !condition(self) {
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting until {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Starts a sentinel monitoring the primary on `primary_port`, and waits until it answers.
fn start_sentinel(primary_port: u16) -> SentinelProcess {
    for _ in 0..5 {
        let port = free_port();
        let dir = TempDir::new("sentinel");
        let config = dir.path().join("sentinel.conf");
        let mut file = File::create(&config).expect("cannot write the sentinel's config");
        writeln!(
            file,
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
             sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n\
             sentinel down-after-milliseconds {SERVICE} {down}\n\
             sentinel failover-timeout {SERVICE} 5000\n\
             sentinel parallel-syncs {SERVICE} 1",
            dir = dir.path().display(),
            down = DOWN_AFTER.as_millis(),
        )
        .expect("cannot write the sentinel's config");
        let mut child = spawn_sentinel(&config);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if connection(port).is_some() {
                return SentinelProcess {
                    child,
                    port,
                    _dir: dir,
                };
            }
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("a sentinel did not start after 5 attempts");
}

fn spawn_sentinel(config: &std::path::Path) -> Child {
    let sentinel = Command::new("redis-sentinel")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match sentinel {
        Ok(child) => child,
        Err(_) => Command::new("redis-server")
            .arg(config)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run redis-sentinel nor redis-server --sentinel"),
    }
}

/// A connection to the server or sentinel on `port` of loopback, or `None` when it does not
/// answer within half a second.
pub fn connection(port: u16) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()
}

/// Runs `cmd` on the server or sentinel on `port`, panicking with the reason when it fails.
fn run<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> T {
    let mut conn = connection(port).unwrap_or_else(|| panic!("nothing answers on port {port}"));
    cmd.query(&mut conn)
        .unwrap_or_else(|err| panic!("{cmd:?} on {port}: {err}"))
}

/// The server on `port`'s `INFO replication`, empty when it does not answer.
fn replication(port: u16) -> String {
    connection(port)
        .and_then(|mut conn| redis::cmd("INFO").arg("replication").query(&mut conn).ok())
        .unwrap_or_default()
}

/// The role the server on `port` answers `ROLE` with: `master` or `slave`.
pub fn role(port: u16) -> String {
    let role: Vec<redis::Value> = run(port, &redis::cmd("ROLE"));
    match role.first() {
        Some(redis::Value::BulkString(role)) => String::from_utf8_lossy(role).into_owned(),
        other => panic!("ROLE answered {other:?}"),
    }
}

/// The address the sentinel on `port` gives for the primary, `None` when it gives none.
fn primary_of(port: u16) -> Option<u16> {
    let (_, port): (String, String) = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(SERVICE)
        .query(&mut connection(port)?)
        .ok()?;
    port.parse().ok()
}

/// How many replicas the sentinel on `port` knows of the primary.
fn replicas_of(port: u16) -> Option<usize> {
    let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
        .arg("REPLICAS")
        .arg(SERVICE)
        .query(&mut connection(port)?)
        .ok()?;
    Some(replicas.len())
}
