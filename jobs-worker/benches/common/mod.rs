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

/// CPU time this process has used so far (user + system), in seconds.
#[allow(dead_code)] // Each benchmark compiles this module; `rules` has no use for it.
pub(crate) fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
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
