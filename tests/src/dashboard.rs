//! `jobsctl dashboard` under test: the real binary on a free loopback port, stopped on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, http};

/// A running `jobsctl dashboard`.
pub struct Dashboard {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

impl Dashboard {
    /// Starts `program` (integration tests pass `env!("CARGO_BIN_EXE_test_jobs")`) as
    /// `jobsctl --redis URL dashboard --listen 127.0.0.1:<free port> args...` with `envs`, and
    /// waits until it answers HTTP.
    pub fn start(program: &str, redis_url: &str, args: &[&str], envs: &[(&str, &str)]) -> Self {
        Dashboard::start_on("127.0.0.1", program, redis_url, args, envs)
    }

    /// Starts `jobsctl dashboard` listening on `ip` (`0.0.0.0`, say) and a free port, as
    /// [`Dashboard::start`] does; it is reached on loopback.
    pub fn start_on(
        ip: &str,
        program: &str,
        redis_url: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        let port = free_port();
        let listen = format!("{ip}:{port}");
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(program)
            .args(["--redis", redis_url, "dashboard", "--listen", &listen])
            .args(args)
            .env_remove("REDIS_URL")
            .env_remove(redjob::queue::PREFIX_ENV)
            .env_remove(redjob_worker::ops::dashboard::AUTH_ENV)
            .env_remove(redjob_worker::ops::dashboard::READ_ONLY_AUTH_ENV)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start jobsctl dashboard");
        let mut dashboard = Dashboard { child, addr };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http::get(&dashboard.addr, "/").is_err() {
            if let Some(status) = dashboard
                .child
                .try_wait()
                .expect("cannot poll the dashboard")
            {
                panic!("jobsctl dashboard exited with {status} before answering");
            }
            assert!(
                Instant::now() < deadline,
                "jobsctl dashboard never answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        dashboard
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends `request` to the dashboard.
    #[track_caller]
    pub fn send(&self, request: http::Request<'_>) -> http::Response {
        request
            .send(&self.addr)
            .unwrap_or_else(|err| panic!("the dashboard did not answer: {err}"))
    }

    /// `GET path`, which must answer 200 with JSON.
    #[track_caller]
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let response = self.send(http::Request::get(path));
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
        response.json()
    }

    /// A `POST path` as the dashboard's own page sends it: same origin, with the
    /// `X-Requested-With` header and a JSON body.
    pub fn page_post<'a>(&self, path: &'a str, body: &'a str) -> http::Request<'a> {
        http::Request::post(path)
            .header("X-Requested-With", "jobs-dashboard")
            .header("Origin", self.url())
            .header("Sec-Fetch-Site", "same-origin")
            .header("Content-Type", "application/json")
            .body(body)
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
