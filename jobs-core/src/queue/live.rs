//! Live records: what a running process (a worker, an outbox relay) keeps in Redis about
//! itself while it runs. Its record lives under a key with a time to live, which it refreshes,
//! and its id sits in an index scored by the time of the last refresh, so a process that dies
//! leaves a record that expires and an index entry that readers drop
//! ([`Admin::workers`](crate::admin::Admin::workers)).

use chrono::{DateTime, Utc};
use std::time::Duration;

/// The commands that write (or refresh) `id`'s record `record` at `key` for `ttl`, and list
/// `id` in `index` as seen `now`. Single-key commands: on a cluster the two keys are in
/// different slots, and `query_each` sends each to its node.
pub fn record_commands(
    index: &str,
    key: &str,
    id: &str,
    record: &str,
    ttl: Duration,
    now: DateTime<Utc>,
) -> [redis::Cmd; 2] {
    [
        redis::cmd("SET")
            .arg(key)
            .arg(record)
            .arg("EX")
            .arg(ttl.as_secs())
            .clone(),
        redis::cmd("ZADD")
            .arg(index)
            .arg(now.timestamp())
            .arg(id)
            .clone(),
    ]
}

/// The commands that remove `id`'s record at `key` and its entry in `index`: its process
/// stopped.
pub fn removal_commands(index: &str, key: &str, id: &str) -> [redis::Cmd; 2] {
    [
        redis::cmd("DEL").arg(key).clone(),
        redis::cmd("ZREM").arg(index).arg(id).clone(),
    ]
}
