//! What the benchmarks share: the JSON line each run prints, its number format, the wall
//! clock that handlers in different processes stamp their times with, and emptying Redis
//! between runs.

use redjob::RedisQueue;
use serde_json::{json, Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// The line of one run: `system`, `scenario`, then the scenario's fields, or its `error`.
pub(crate) fn result_line(
    scenario: &str,
    result: Result<Map<String, Value>, String>,
) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("system".into(), json!("ours"));
    line.insert("scenario".into(), json!(scenario));
    match result {
        Ok(fields) => line.extend(fields),
        Err(e) => {
            line.insert("error".into(), json!(e));
        }
    }
    line
}

/// `x` with two decimals.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The `p` percentile (0 to 1) of `sorted`, by nearest rank, as the peer kit computes it.
#[allow(dead_code)] // Each benchmark compiles this module; `rules` has no use for it.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> T {
    sorted[((p * sorted.len() as f64).ceil() as usize).max(1) - 1]
}

/// CPU time this process has used so far (user + system, every thread), in seconds. Read
/// from the process's CPU clock: `/proc/self/stat` counts it in 10 ms ticks, which in a run of
/// 20,000 jobs are steps of 0.5 µs per job.
#[allow(dead_code)] // Each benchmark compiles this module; `rules` has no use for it.
pub(crate) fn own_cpu_seconds() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to write into.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    if read != 0 {
        return 0.0;
    }
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// Microseconds since the Unix epoch: comparable across the processes of one run, unlike an
/// `Instant`.
pub(crate) fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Empties the benchmark's Redis between runs.
#[allow(dead_code)] // Each benchmark compiles this module; `schedules` has no use for it.
pub(crate) async fn flush(queue: &RedisQueue) -> Result<(), String> {
    queue
        .query::<()>(&redis::cmd("FLUSHALL"))
        .await
        .map_err(|e| e.to_string())
}
