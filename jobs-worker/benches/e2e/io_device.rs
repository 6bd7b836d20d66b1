//! The simulated I/O the `io` scenario's jobs await: a device that completes each request
//! exactly at its instant, from a thread of its own, and the samples of how late it and the
//! woken tasks were.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::common::{nearest_rank, round2};

/// How long each [`Io`] job's request took as its handler saw it, in µs.
pub(crate) static IO_AWAITED_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// How late the [`IoDevice`] completed each request after its instant, in µs.
static IO_DEVICE_LATE_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// How long each request's task took to resume once the [`IoDevice`] completed it, in µs.
static IO_WAKE_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// The samples of the requests made since the last call, summed up (ms), and cleared.
pub(crate) fn take_io_figures() -> Map<String, Value> {
    let mut figures = Map::new();
    for (name, samples) in [
        ("io_device_late_ms", &IO_DEVICE_LATE_US),
        ("io_wake_ms", &IO_WAKE_US),
        ("io_awaited_ms", &IO_AWAITED_US),
    ] {
        figures.insert(name.into(), mean_p50_p99_ms(samples));
        samples.lock().unwrap().clear();
    }
    figures
}

/// Adds `took` to `samples`, in µs.
pub(crate) fn record_us(samples: &Mutex<Vec<u64>>, took: Duration) {
    samples.lock().unwrap().push(took.as_micros() as u64);
}

/// The mean, median and p99 (by [`nearest_rank`]) of `samples`, in ms.
fn mean_p50_p99_ms(samples: &Mutex<Vec<u64>>) -> Value {
    let mut all = samples.lock().unwrap().clone();
    if all.is_empty() {
        return Value::Null;
    }
    all.sort_unstable();
    let mean = all.iter().sum::<u64>() as f64 / all.len() as f64;
    let ms = |p: f64| round2(nearest_rank(&all, p) as f64 / 1000.0);
    json!({
        "mean": round2(mean / 1000.0),
        "p50": ms(0.50),
        "p99": ms(0.99),
    })
}

/// Simulated I/O: each request completes exactly when asked, woken from a thread of its own as
/// a socket's reply would be. Tokio's timer rounds every sleep up to its next millisecond tick,
/// so `tokio::time::sleep(5 ms)` lasts 5 to 6 ms, and a scenario built on it would measure the
/// timer wheel, not the worker.
pub(crate) struct IoDevice {
    requests: std::sync::mpsc::Sender<IoRequest>,
}

/// A simulated I/O request: when it completes, and whom to tell.
/// (The device answers with the instant it completed the request.)
type IoRequest = (Instant, tokio::sync::oneshot::Sender<Instant>);

impl IoDevice {
    /// Completes `wait` from now.
    pub(crate) async fn request(&self, wait: Duration) {
        let (done, completed) = tokio::sync::oneshot::channel();
        let sent = self.requests.send((Instant::now() + wait, done));
        sent.expect("the simulated I/O thread runs as long as the process");
        let completed_at = completed
            .await
            .expect("the simulated I/O thread completes every request");
        record_us(&IO_WAKE_US, completed_at.elapsed());
    }
}

pub(crate) fn io_device() -> &'static IoDevice {
    static DEVICE: OnceLock<IoDevice> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let (requests, incoming) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            exact_timers();
            complete_requests(incoming)
        });
        IoDevice { requests }
    })
}

/// Lets the calling thread's timed waits end at their instant. Linux ends a sleeping thread's
/// timer up to its timer slack late (50 µs by default) so that it can wake several at once; a
/// device's reply has no such delay, and the scenario would charge it to the worker.
fn exact_timers() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The simulated I/O thread: completes each request at its instant, in instant order (two
/// requests of one instant in arrival order).
fn complete_requests(incoming: std::sync::mpsc::Receiver<IoRequest>) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut pending: BTreeMap<(Instant, u64), tokio::sync::oneshot::Sender<Instant>> =
        BTreeMap::new();
    let mut arrived = 0u64;
    loop {
        let now = Instant::now();
        while let Some(due) = pending.first_entry().filter(|entry| entry.key().0 <= now) {
            record_us(&IO_DEVICE_LATE_US, now - due.key().0);
            let _ = due.remove().send(Instant::now());
        }
        let received = match pending.keys().next() {
            Some((at, _)) => incoming.recv_timeout(at.saturating_duration_since(now)),
            None => incoming.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok((at, done)) => {
                pending.insert((at, arrived), done);
                arrived += 1;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}
