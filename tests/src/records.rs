//! What the example `record` job wrote: one entry per run in [`RECORDS_KEY`], with its job's
//! uuid and attempt.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use examples::RECORDS_KEY;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// Waits until at least `runs` runs have been recorded; panics, naming the caller, after
/// `timeout`.
#[track_caller]
pub fn wait_for_runs(
    conn: &MultiplexedConnection,
    runs: usize,
    timeout: Duration,
) -> impl Future<Output = ()> + '_ {
    crate::wait_until(timeout, format!("{runs} runs are recorded"), move || {
        let mut conn = conn.clone();
        async move { records_len(&mut conn).await >= runs }
    })
}

/// How many runs have been recorded.
pub async fn records_len(conn: &mut MultiplexedConnection) -> usize {
    conn.llen(RECORDS_KEY).await.expect("LLEN answers")
}

/// Every recorded run: the attempt number of each run, by job uuid.
pub async fn runs_by_uuid(conn: &mut MultiplexedConnection) -> HashMap<String, Vec<u64>> {
    let mut runs: HashMap<String, Vec<u64>> = HashMap::new();
    for (uuid, attempt) in runs_in_order(conn).await {
        runs.entry(uuid).or_default().push(attempt);
    }
    runs
}

/// Every recorded run in the order the runs started: its job's uuid and attempt number.
pub async fn runs_in_order(conn: &mut MultiplexedConnection) -> Vec<(String, u64)> {
    let entries: Vec<String> = conn
        .lrange(RECORDS_KEY, 0, -1)
        .await
        .expect("LRANGE answers");
    entries
        .iter()
        .map(|entry| {
            let entry: serde_json::Value = serde_json::from_str(entry).expect("a JSON record");
            let uuid = entry["uuid"].as_str().expect("a uuid").to_owned();
            let attempt = entry["attempt"].as_u64().expect("an attempt number");
            (uuid, attempt)
        })
        .collect()
}
