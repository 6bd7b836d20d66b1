//! What the example workflow jobs recorded: each [`examples::Step`] and [`examples::Caught`]
//! appends an entry to [`examples::STEPS_KEY`] (a callback's label is `caught:<label>`).

use redis::aio::ConnectionLike;

/// Every entry recorded so far, in the order the steps finished.
pub async fn recorded(conn: &mut impl ConnectionLike) -> Vec<serde_json::Value> {
    let entries: Vec<String> = redis::cmd("LRANGE")
        .arg(examples::STEPS_KEY)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .expect("LRANGE answers");
    entries
        .iter()
        .map(|entry| serde_json::from_str(entry).expect("a step's entry is JSON"))
        .collect()
}

/// The labels of `steps`, in order.
pub fn labels(steps: &[serde_json::Value]) -> Vec<String> {
    steps
        .iter()
        .map(|step| step["label"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The labels recorded so far, in order.
pub async fn recorded_labels(conn: &mut impl ConnectionLike) -> Vec<String> {
    labels(&recorded(conn).await)
}

/// Asserts that no job recorded in `steps` ran twice (by its uuid).
#[track_caller]
pub fn assert_each_ran_once(steps: &[serde_json::Value]) {
    let mut uuids: Vec<&str> = steps.iter().filter_map(|s| s["uuid"].as_str()).collect();
    let all = uuids.len();
    uuids.sort();
    uuids.dedup();
    assert_eq!(uuids.len(), all, "a job ran twice");
}
