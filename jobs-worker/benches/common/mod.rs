//! What the benchmarks share: the JSON line each run prints, and its number format.

use serde_json::{json, Map, Value};

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
