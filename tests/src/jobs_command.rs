//! The `jobsctl` command under test: run against a test server, its exit status and output
//! collected.

use std::io::Write;
use std::process::{Command, ExitStatus, Stdio};

/// The `jobsctl` binary pointed at one Redis. Integration tests pass
/// `env!("CARGO_BIN_EXE_test_jobs")`.
pub struct JobsCommand {
    program: String,
    redis_url: String,
}

/// What one run of `jobsctl` did.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status.
    pub status: ExitStatus,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Ran {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

impl JobsCommand {
    /// `jobsctl` at `program`, run with `--redis redis_url`.
    pub fn new(program: &str, redis_url: &str) -> JobsCommand {
        JobsCommand {
            program: program.to_owned(),
            redis_url: redis_url.to_owned(),
        }
    }

    /// Runs `jobsctl --redis URL args...` with stdin closed, and waits for it.
    pub fn run(&self, args: &[&str]) -> Ran {
        self.run_with_input(args, None)
    }

    /// Runs `jobsctl` with `input` written to its stdin (a pipe, not a terminal).
    pub fn run_with_input(&self, args: &[&str], input: Option<&str>) -> Ran {
        let mut child = Command::new(&self.program)
            .args(["--redis", &self.redis_url])
            .args(args)
            .env_remove("REDIS_URL")
            .env_remove(redjob::queue::PREFIX_ENV)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start the jobsctl command");
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("piped stdin");
            let _ = stdin.write_all(input.as_bytes());
        }
        let output = child.wait_with_output().expect("cannot wait for jobs");
        Ran {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `jobsctl` on a pseudo-terminal, as a person at a terminal would, typing `input`. It
    /// goes through util-linux's `script`, so stdout and stderr arrive mixed in `stdout`.
    pub fn run_on_terminal(&self, args: &[&str], input: &str) -> Ran {
        let quote = |arg: &str| format!("'{}'", arg.replace('\'', r"'\''"));
        let command: Vec<String> = [self.program.as_str(), "--redis", &self.redis_url]
            .iter()
            .chain(args)
            .map(|arg| quote(arg))
            .collect();
        let mut child = Command::new("script")
            .args(["-qec", &command.join(" "), "/dev/null"])
            .env_remove("REDIS_URL")
            .env_remove(redjob::queue::PREFIX_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run `script` (util-linux) for a pseudo-terminal");
        let mut stdin = child.stdin.take().expect("piped stdin");
        let _ = stdin.write_all(input.as_bytes());
        drop(stdin);
        let output = child.wait_with_output().expect("cannot wait for script");
        Ran {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `jobsctl --json args...`, which must succeed, and parses what it printed.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let ran = self.run(&[&["--json"], args].concat());
        assert!(
            ran.status.success(),
            "jobs {args:?} failed with {}: {}",
            ran.status,
            ran.stderr
        );
        serde_json::from_str(&ran.stdout)
            .unwrap_or_else(|err| panic!("jobs {args:?} printed no JSON ({err}): {}", ran.stdout))
    }
}
