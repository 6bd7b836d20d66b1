//! A private `redis-server` per test: started on a free loopback port in a temporary directory,
//! plain or TLS-only, killed and restarted in place, stopped on drop.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redjob::{QueueConfig, RedisQueue};

use crate::temp_dir::TempDir;
use crate::tls::{make_tls_files, TlsFiles};

/// How long `TestRedis::start` waits for a new server to answer as itself.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How many times `TestRedis::start` tries a fresh port when the server fails to start.
const START_ATTEMPTS: usize = 5;

/// The message when no `redis-server` binary can be run.
pub const REDIS_SERVER_MISSING: &str =
    "redis-server not found: install the Debian package redis-server";

/// A private `redis-server` on a free loopback port, with its own temporary directory and no
/// persistence unless its options turn it on. It can be killed and restarted in place, to test
/// what survives a Redis crash. Dropping it kills the server and waits for it to exit.
pub struct TestRedis {
    child: Child,
    port: u16,
    url: String,
    tls: Option<TlsFiles>,
    dir: TempDir,
    /// The server's options after the defaults (TLS and `start_with`'s), for a restart.
    options: Vec<String>,
}

impl TestRedis {
    /// Starts a server and waits until it answers as itself (`INFO server`'s `process_id`
    /// is its own). Panics with a clear message when
    /// `redis-server` is not installed or does not come up.
    ///
    /// The binary is `$REDIS_SERVER` when set, else `redis-server` on the `PATH`, else
    /// `/usr/bin/redis-server`.
    pub fn start() -> TestRedis {
        TestRedis::start_with(&[])
    }

    /// Starts a server as [`TestRedis::start`] does, with `extra` command-line options after
    /// the defaults (a later option wins, so `["--appendonly", "yes"]` turns persistence on).
    pub fn start_with(extra: &[&str]) -> TestRedis {
        TestRedis::start_server(&|| extra.iter().map(|arg| arg.to_string()).collect(), false)
    }

    /// Starts a Redis Cluster node that has no slots yet: `cluster-enabled yes`, its cluster
    /// file in its own directory, and the given node timeout in milliseconds. Its cluster bus
    /// port is picked anew on each attempt to start, with the client port, so a bus port that
    /// another test's server took in the meantime costs one attempt, not all of them.
    pub fn start_cluster_node(node_timeout_ms: u32) -> TestRedis {
        let options = || {
            let bus_port = free_port().to_string();
            [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                &bus_port,
                "--cluster-node-timeout",
                &node_timeout_ms.to_string(),
            ]
            .map(String::from)
            .to_vec()
        };
        TestRedis::start_server(&options, false)
    }

    /// Starts a server that accepts only TLS connections, on `rediss://127.0.0.1:PORT/`. A CA
    /// and a server certificate for `127.0.0.1` and `localhost` are made for it with the
    /// `openssl` command; clients trust that CA through [`TestRedis::ca_file`], which
    /// [`TestRedis::queue`], [`TestRedis::client`] and [`TestRedis::config`] use. Clients
    /// need no certificate of their own.
    pub fn start_tls() -> TestRedis {
        TestRedis::start_server(&Vec::new, true)
    }

    /// Starts a server, trying again on new ports when it does not come up. `extra` gives the
    /// options of each attempt, so options that name ports of their own can change with it.
    fn start_server(extra: &dyn Fn() -> Vec<String>, tls: bool) -> TestRedis {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = TempDir::new("redis");
            let (scheme, tls_files, tls_args) = if tls {
                let (files, args) = make_tls_files(dir.path(), port);
                ("rediss", Some(files), args)
            } else {
                ("redis", None, Vec::new())
            };
            let extra = extra();
            let args: Vec<&str> = tls_args
                .iter()
                .chain(extra.iter())
                .map(String::as_str)
                .collect();
            let child = spawn_redis_server(port, dir.path(), &args);
            let mut server = TestRedis {
                child,
                port,
                url: format!("{scheme}://127.0.0.1:{port}/"),
                tls: tls_files,
                dir,
                options: args.iter().map(|arg| arg.to_string()).collect(),
            };
            match server.wait_until_ready(START_TIMEOUT) {
                Ok(()) => return server,
                // The server is dropped, and so killed, at the end of this turn.
                Err(why) => failures.push(format!(
                    "port {port}: {why}\n--- server output ---\n{}",
                    server_output(server.dir.path())
                )),
            }
        }
        panic!(
            "redis-server did not start after {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        );
    }

    /// Starts a primary and a replica of it, and waits until the replica is online.
    pub fn start_replicated() -> (TestRedis, TestRedis) {
        let primary = TestRedis::start();
        let port = primary.port().to_string();
        let replica = TestRedis::start_with(&["--replicaof", "127.0.0.1", &port]);
        let mut conn = primary
            .client()
            .get_connection()
            .expect("a connection to the primary");
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut conn)
                .expect("INFO replication");
            if info.contains("state=online") {
                return (primary, replica);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the replica did not come online: {info}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server with SIGKILL, as a crash or an OOM kill would, and waits for it to
    /// exit. Its directory stays, so [`TestRedis::restart`] finds what it persisted.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Freezes the server with SIGSTOP, as a stalled host or a long pause would: its clients'
    /// commands wait in its sockets until [`TestRedis::resume`].
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// Lets a server frozen by [`TestRedis::freeze`] go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Starts the server again on the same port, in the same directory, with the same
    /// options (killing it first if it still runs), and waits until it answers as itself. With
    /// `--appendonly yes` it reloads its data from the append-only file.
    pub fn restart(&mut self) {
        self.kill();
        let options: Vec<&str> = self.options.iter().map(String::as_str).collect();
        self.child = spawn_redis_server(self.port, self.dir.path(), &options);
        if let Err(why) = self.wait_until_ready(START_TIMEOUT) {
            panic!(
                "redis-server did not restart on port {}: {why}\n--- server output ---\n{}",
                self.port,
                server_output(self.dir.path())
            );
        }
    }

    /// The server's URL, `redis://127.0.0.1:PORT/` (`rediss://` for a TLS server).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's URL with a user name and password: `redis://user:password@127.0.0.1:PORT/`.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        self.url
            .replacen("://", &format!("://{user}:{password}@"), 1)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (its log is `redis.log` there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The PEM file of the CA that signed a TLS server's certificate (`None` without TLS).
    pub fn ca_file(&self) -> Option<&Path> {
        self.tls.as_ref().map(|tls| tls.ca_cert.as_path())
    }

    /// The default settings with this server's CA trusted, for a TLS server.
    pub fn config(&self) -> QueueConfig {
        QueueConfig {
            tls_ca_file: self.ca_file().map(Path::to_path_buf),
            prefix: String::new(),
            ..QueueConfig::default()
        }
    }

    /// A queue handle for this server, with default settings ([`TestRedis::config`]).
    pub fn queue(&self) -> RedisQueue {
        self.queue_with(self.config())
    }

    /// A queue handle for this server, with the given settings. For a TLS server, a config
    /// without a `tls_ca_file` gets this server's CA.
    pub fn queue_with(&self, mut config: QueueConfig) -> RedisQueue {
        if config.tls_ca_file.is_none() {
            config.tls_ca_file = self.ca_file().map(Path::to_path_buf);
        }
        RedisQueue::with_config(&self.url, config).expect("the test server's URL is valid")
    }

    /// A `redis::Client` for this server.
    pub fn client(&self) -> redis::Client {
        redjob::queue::redis_client(&self.url, &self.config())
            .expect("the test server's URL is valid")
    }

    /// A raw async connection, for inspecting and arranging Redis state in tests. Its replies
    /// may take up to 30 s (large LRANGEs on a busy machine), not redis-rs' default 0.5 s.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(30)));
        self.client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|err| panic!("cannot connect to the test server {}: {err}", self.url))
    }

    /// The server's clock (`TIME`), in seconds since the epoch with microseconds.
    pub async fn server_time(&self) -> f64 {
        server_time(&mut self.conn().await).await
    }

    /// Polls the server with `INFO server` until it answers with its own process id, it
    /// exits, or `timeout` passes. A plain server is asked over raw TCP; a TLS server through
    /// a TLS connection.
    fn wait_until_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(status) = self.child.try_wait().map_err(|err| err.to_string())? {
                return Err(format!("redis-server exited with {status}"));
            }
            // The answer must come from this server: another test may have been handed the
            // same free port at the same moment, and then this one cannot bind it and exits
            // while the other answers.
            let pid = self.child.id();
            let ours = match self.tls {
                None => answers_as(addr, pid),
                Some(_) => tls_answers_as(&self.client(), pid),
            };
            if ours {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no PONG from {} within {timeout:?}", self.url));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::fmt::Debug for TestRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRedis")
            .field("url", &self.url)
            .field("pid", &self.child.id())
            .field("dir", &self.dir.path())
            .finish()
    }
}

/// The clock of the server behind `conn` (`TIME`), in seconds since the epoch.
pub async fn server_time(conn: &mut redis::aio::MultiplexedConnection) -> f64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .expect("TIME answers");
    secs as f64 + micros as f64 / 1e6
}

/// A port on 127.0.0.1 that nothing listens on, for tests of an unreachable Redis: port 1,
/// below the range the kernel gives out for port 0, so no server a test starts on a
/// [`free_port`] can take it (a released free port can be taken by another test's server
/// before the connection is tried, and a test would then reach that server).
pub const CLOSED_PORT: u16 = 1;

/// A port on 127.0.0.1 that was free a moment ago: bound on port 0, then released.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot bind a TCP port on 127.0.0.1")
}

fn spawn_redis_server(port: u16, dir: &Path, extra: &[&str]) -> Child {
    // Appending keeps what a server wrote before it was restarted in the same directory.
    let output = File::options()
        .create(true)
        .append(true)
        .open(dir.join("stdout.log"))
        .expect("cannot create the server log");
    let candidates: Vec<PathBuf> = match std::env::var_os("REDIS_SERVER") {
        Some(path) => vec![path.into()],
        None => vec!["redis-server".into(), "/usr/bin/redis-server".into()],
    };
    for program in candidates {
        let spawned = Command::new(&program)
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("cannot share the server log"))
            .stderr(output.try_clone().expect("cannot share the server log"))
            .spawn();
        match spawned {
            Ok(child) => return child,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => panic!("cannot run {}: {err}", program.display()),
        }
    }
    panic!("{REDIS_SERVER_MISSING}");
}

/// Whether the server on `addr` answers, and is the process `pid` (`INFO server`'s
/// `process_id`).
fn answers_as(addr: SocketAddr, pid: u32) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"INFO server\r\n").is_err() {
        return false;
    }
    // A bulk string: `$<length>\r\n<text>\r\n`, read until the process id's line is in.
    let wanted = format!("process_id:{pid}\r\n");
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(read @ 1..) = stream.read(&mut chunk) {
        reply.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&reply);
        let id_line_read = text
            .split_once("process_id:")
            .is_some_and(|(_, rest)| rest.contains("\r\n"));
        if id_line_read {
            return text.contains(&wanted);
        }
    }
    false
}

/// [`answers_as`] for a TLS server, through a TLS connection.
fn tls_answers_as(client: &redis::Client, pid: u32) -> bool {
    client
        .get_connection_with_timeout(Duration::from_millis(500))
        .and_then(|mut conn| redis::cmd("INFO").arg("server").query::<String>(&mut conn))
        .is_ok_and(|info| info.contains(&format!("process_id:{pid}\r\n")))
}

fn server_output(dir: &Path) -> String {
    ["stdout.log", "redis.log"]
        .iter()
        .map(|name| std::fs::read_to_string(dir.join(name)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("")
}
