//! A worker process under test: started with arguments, its JSON log collected, signalled,
//! killed, and awaited.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::wait_for;

/// A running worker binary with `--json` logging, whose log lines are collected as they come.
pub struct WorkerProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The thread reading the log, which ends at the log's end (the process closed its
    /// stderr).
    reader: JoinHandle<()>,
}

/// One job event from a worker's JSON log.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEvent {
    /// RUNNING, DONE, RELEASED or FAILED.
    pub status: String,
    /// The job's registered name.
    pub job: String,
    /// The job's uuid.
    pub uuid: String,
    /// The queue.
    pub queue: String,
    /// The attempt number.
    pub attempt: u64,
    /// The reason, for RELEASED, INTERRUPTED and FAILED.
    pub reason: Option<String>,
    /// The log line's timestamp, in ms since the epoch.
    pub at_ms: f64,
}

impl WorkerProcess {
    /// Starts the worker binary at `program` against `redis_url` with extra `args` (`--json`
    /// is added). Integration tests pass `env!("CARGO_BIN_EXE_test_worker")`.
    pub fn start(program: &str, redis_url: &str, args: &[&str]) -> WorkerProcess {
        WorkerProcess::start_with_env(program, redis_url, args, &[])
    }

    /// Starts the worker as [`WorkerProcess::start`] does, with extra environment variables
    /// (`JOBS_SIGNING_KEY`, `REDIS_TLS_CA_FILE`, ...; `[("TOKIO_WORKER_THREADS", "1")]` gives
    /// its runtime a single thread). Those two, the key prefix, the Laravel app key and the
    /// OTLP endpoints are otherwise not passed on from the test's own environment, so that a
    /// worker's settings are the test's alone.
    pub fn start_with_env(
        program: &str,
        redis_url: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> WorkerProcess {
        let mut command = Command::new(program);
        command
            .args(["--redis", redis_url, "--json"])
            .args(args)
            .env_remove(redjob::payload::signing::SIGNING_KEY_ENV)
            .env_remove(redjob::queue::TLS_CA_FILE_ENV)
            .env_remove(redjob::queue::PREFIX_ENV)
            .env_remove(redjob::payload::encrypted::APP_KEY_ENV)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env("REDIS_URL", redis_url)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied());
        WorkerProcess::spawn(command)
    }

    /// Starts `command`, any program that runs jobs (an application's worker binary, a
    /// service with embedded workers), collecting its stderr as the log lines.
    pub fn spawn(mut command: Command) -> WorkerProcess {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {:?}: {err}", command.get_program()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        WorkerProcess {
            child,
            lines,
            reader,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every log line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Its JSON log lines (`--json`) whose message contains `text`.
    pub fn json_lines_with(&self, text: &str) -> Vec<serde_json::Value> {
        self.lines()
            .iter()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|line| line["message"].as_str().is_some_and(|m| m.contains(text)))
            .collect()
    }

    /// The job events logged so far, in order.
    pub fn events(&self) -> Vec<JobEvent> {
        self.lines().iter().filter_map(|l| parse_event(l)).collect()
    }

    /// The DONE events logged so far, in the order the jobs' ends were logged.
    pub fn done(&self) -> Vec<JobEvent> {
        self.events()
            .into_iter()
            .filter(|e| e.status == "DONE")
            .collect()
    }

    /// Waits until a job event matching `pred` is logged and returns it.
    pub async fn wait_for_event(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&JobEvent) -> bool,
    ) -> JobEvent {
        wait_for(timeout, what, || {
            let found = self.events().into_iter().find(|e| pred(e));
            async move { found }
        })
        .await
    }

    /// Waits until the worker logged "worker started".
    pub async fn wait_started(&self) {
        wait_for(
            Duration::from_secs(30),
            "the worker logged its start",
            || {
                let started = self.lines().iter().any(|l| l.contains("worker started"));
                async move { started.then_some(()) }
            },
        )
        .await
    }

    /// Sends a signal (`"TERM"`, `"INT"`, `"KILL"`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }

    /// Whether the process is still running (it has not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the process with SIGKILL, as a crash would, and waits until it is gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit and returns its status; panics after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let child = &mut self.child;
        let status = wait_for(timeout, "the worker exited", || {
            let status = child.try_wait().expect("cannot poll the worker");
            async move { status }
        })
        .await;
        // What the worker wrote last may still be in the pipe: its end is where the log ends.
        let reader = &self.reader;
        wait_for(timeout, "the worker's log was read to its end", || {
            let ended = reader.is_finished();
            async move { ended.then_some(()) }
        })
        .await;
        status
    }

    /// Waits for the worker to refuse to start: it exits within `timeout` with the status of
    /// a setting to fix (78), having said why in exactly one `worker: ...` line containing
    /// `why`. Panics otherwise.
    pub async fn wait_refused(&mut self, timeout: Duration, why: &str) {
        let status = self.wait_exit(timeout).await;
        let lines = self.lines();
        assert_eq!(
            status.code(),
            Some(redjob_worker::CONFIG_EXIT_CODE.into()),
            "{lines:#?}"
        );
        let saying: Vec<&String> = lines.iter().filter(|l| l.contains(why)).collect();
        assert_eq!(saying.len(), 1, "one line says why: {lines:#?}");
        assert!(saying[0].starts_with("worker: "), "{lines:#?}");
    }
}

/// How many of its last lines a worker shows when a test fails while it is alive.
const LINES_SHOWN_ON_FAILURE: usize = 60;

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // A failing test shows what the worker said: a CI log has nothing else to go on.
        if std::thread::panicking() {
            let still_running = self.is_running();
            let lines = self.lines();
            let shown = &lines[lines.len().saturating_sub(LINES_SHOWN_ON_FAILURE)..];
            eprintln!(
                "worker {} ({}; last {} of {} lines):\n{}",
                self.pid(),
                if still_running {
                    "still running"
                } else {
                    "exited"
                },
                shown.len(),
                lines.len(),
                shown.join("\n")
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_event(line: &str) -> Option<JobEvent> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let status = value.get("status")?.as_str()?.to_owned();
    let span = value.get("span")?;
    let text =
        |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    let at_ms = value
        .get("timestamp")
        .and_then(|t| t.as_str())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_micros() as f64 / 1000.0)
        .unwrap_or(0.0);
    Some(JobEvent {
        status,
        job: text(span, "job")?,
        uuid: text(span, "uuid")?,
        queue: text(span, "queue")?,
        attempt: span.get("attempt").and_then(|a| a.as_u64()).unwrap_or(0),
        reason: text(&value, "reason"),
        at_ms,
    })
}
