//! `redis-cli monitor` on a test server: every command the server runs, in the order it ran
//! them.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wait_until;

/// The commands a server runs while this lives, one line each (`<time> [<db> <client
/// address>] "COMMAND" "arg" ...`).
pub struct Monitor {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Monitor {
    /// Starts monitoring the server on `port` and waits until it has accepted it.
    pub async fn start(port: u16) -> Monitor {
        let mut child = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "monitor"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                collected.lock().unwrap().push(line);
            }
        });
        let monitor = Monitor { child, lines };
        wait_until(Duration::from_secs(30), "MONITOR answers OK", || {
            let attached = monitor.lines().first().is_some_and(|l| l == "OK");
            async move { attached }
        })
        .await;
        monitor
    }

    /// The lines so far, the first being MONITOR's `OK`.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
