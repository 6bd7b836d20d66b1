//! A private PostgreSQL cluster per test: made with `initdb` in a temporary directory, served
//! by its own `postgres` on a free loopback port, stopped on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_server::free_port;
use crate::temp_dir::TempDir;

/// How long `TestPostgres::start` waits for a new server to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times `TestPostgres::start` tries a fresh port when the server fails to start.
const START_ATTEMPTS: usize = 3;

/// How long a dropped server has to finish its fast shutdown before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The message when PostgreSQL's server programs cannot be found.
pub const POSTGRES_MISSING: &str =
    "PostgreSQL's initdb not found: install the Debian package postgresql (or set PG_BIN)";

/// A private PostgreSQL server with a fresh cluster: user `postgres`, trusted on loopback, no
/// fsync (a test's data need not survive a power cut). Dropping it shuts the server down and
/// removes the cluster.
///
/// PostgreSQL refuses to run as root, so under root the cluster belongs to, and the server
/// runs as, the system user `postgres` that Debian's package creates.
pub struct TestPostgres {
    child: Child,
    port: u16,
    dir: TempDir,
    user: Option<User>,
}

impl TestPostgres {
    /// Makes a cluster, starts its server and waits until it accepts connections. Panics with
    /// a clear message when PostgreSQL is not installed or does not come up.
    ///
    /// The programs are taken from `$PG_BIN` when set, else from the newest
    /// `/usr/lib/postgresql/<version>/bin` (Debian's layout), else from the `PATH`.
    pub fn start() -> TestPostgres {
        let user = unprivileged_user();
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let dir = TempDir::new("postgres");
            if let Some(user) = &user {
                std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))
                    .unwrap_or_else(|err| {
                        panic!("cannot hand {:?} to postgres: {err}", dir.path())
                    });
            }
            init_cluster(dir.path(), user.as_ref());
            let port = free_port();
            let child = spawn_postgres(dir.path(), port, user.as_ref());
            let mut server = TestPostgres {
                child,
                port,
                dir,
                user: user.clone(),
            };
            match server.wait_until_ready(START_TIMEOUT) {
                Ok(()) => return server,
                Err(why) => failures.push(format!(
                    "port {port}: {why}\n--- server log ---\n{}",
                    server.log()
                )),
            }
        }
        panic!(
            "postgres did not start after {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        );
    }

    /// Stops the server (a fast shutdown: sessions end) and starts it again on the same port
    /// with the same cluster, as a restart for maintenance would; waits until it accepts
    /// connections.
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn_postgres(self.dir.path(), self.port, self.user.as_ref());
        if let Err(why) = self.wait_until_ready(START_TIMEOUT) {
            panic!(
                "postgres did not restart: {why}\n--- server log ---\n{}",
                self.log()
            );
        }
    }

    /// The server's URL, `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    fn wait_until_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|err| err.to_string())? {
                return Err(format!("postgres exited with {status}"));
            }
            // Asked through the socket in the cluster's own directory, never over TCP: another
            // test may have been handed the same free port at the same moment, and then this
            // server cannot bind it and exits while the other answers on it.
            let ready = Command::new(program("pg_isready"))
                .args(["-q", "-U", "postgres", "-d", "postgres"])
                .arg("-h")
                .arg(self.dir.path())
                .args(["-p", &self.port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("not accepting connections within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Shuts the server down, killing it if it has not exited within [`STOP_TIMEOUT`].
    fn stop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown: sessions end, the server exits cleanly.
        let _ = Command::new("kill")
            .args(["-s", "INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for TestPostgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPostgres")
            .field("url", &self.url())
            .field("pid", &self.child.id())
            .field("dir", &self.dir.path())
            .finish()
    }
}

/// The user the server runs as when the tests run as root.
#[derive(Clone)]
struct User {
    uid: u32,
    gid: u32,
}

fn unprivileged_user() -> Option<User> {
    let euid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&euid.stdout).trim() != "0" {
        return None;
    }
    let entry = Command::new("getent")
        .args(["passwd", "postgres"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .unwrap_or_else(|| {
            panic!("PostgreSQL does not run as root, and there is no user postgres to run it as: {POSTGRES_MISSING}")
        });
    let entry = String::from_utf8_lossy(&entry.stdout).into_owned();
    let fields: Vec<&str> = entry.trim().split(':').collect();
    let number = |index: usize| -> u32 {
        fields
            .get(index)
            .and_then(|field| field.parse().ok())
            .unwrap_or_else(|| panic!("cannot read the user postgres from {entry:?}"))
    };
    Some(User {
        uid: number(2),
        gid: number(3),
    })
}

/// A command for one of PostgreSQL's programs, run as `user` when given.
fn pg_command(name: &str, user: Option<&User>) -> Command {
    let mut command = Command::new(program(name));
    if let Some(user) = user {
        use std::os::unix::process::CommandExt;
        command.uid(user.uid).gid(user.gid);
    }
    command
}

fn init_cluster(dir: &Path, user: Option<&User>) {
    let output = pg_command("initdb", user)
        .arg("-D")
        .arg(dir.join("data"))
        .args(["--username=postgres", "--auth=trust", "--encoding=UTF8"])
        .args(["--locale=C", "--no-sync", "--no-instructions"])
        .current_dir(dir)
        .output();
    match output {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!(
            "initdb failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => panic!("{POSTGRES_MISSING}"),
        Err(err) => panic!("cannot run initdb: {err}"),
    }
}

fn spawn_postgres(dir: &Path, port: u16, user: Option<&User>) -> Child {
    // Appending keeps what the server logged before a restart.
    let log = File::options()
        .create(true)
        .append(true)
        .open(dir.join("postgres.log"))
        .expect("cannot create the server log");
    pg_command("postgres", user)
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-h", "127.0.0.1"])
        // The socket lives in the cluster's own directory, not in /var/run/postgresql.
        .arg("-k")
        .arg(dir)
        .args([
            "-F",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .args(["-c", "shared_buffers=32MB"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("cannot share the server log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run postgres: {err}"))
}

/// Where PostgreSQL's program `name` is: in `$PG_BIN`, in the newest Debian
/// `/usr/lib/postgresql/<version>/bin`, or on the `PATH`.
fn program(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return Path::new(&dir).join(name);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join(name).exists().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version);
    match newest {
        Some((_, bin)) => bin.join(name),
        None => PathBuf::from(name),
    }
}

/// How many rows the default outbox (`redjob_outbox`) holds, in `pool`'s database.
pub async fn outbox_rows(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM redjob_outbox")
        .fetch_one(pool)
        .await
        .expect("the outbox can be counted")
}

/// Every row of the default outbox, as (uuid, problem): rows a relay kept. Panics on a row
/// still waiting for a relay (it has no problem).
pub async fn kept_rows(pool: &sqlx::PgPool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT uuid::text, problem FROM redjob_outbox")
        .fetch_all(pool)
        .await
        .expect("the outbox can be read")
}
