//! Following a signals stream (`jobs:settled`, `jobs:cancel:signals`) from a point on, with a
//! blocking read on a connection of its own: every reader sees every entry, and a reader that
//! reconnects goes on from the last entry it read.

use std::collections::HashMap;
use std::time::Duration;

use crate::error::Result;
use crate::queue::connection::Connection;
use crate::queue::{RedisQueue, WorkerQueue};

/// Entries read per call.
const BATCH: usize = 1000;

/// A reader of one stream, at the last entry it read.
pub struct Signals {
    queue: RedisQueue,
    key: String,
    from: String,
    connection: Option<Connection>,
}

impl Signals {
    /// A reader of the stream `key` that starts after its newest entry now.
    pub(crate) async fn after_newest(queue: &RedisQueue, key: String) -> Result<Signals> {
        let newest: redis::Value = queue
            .query(
                redis::cmd("XREVRANGE")
                    .arg(&key)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1),
            )
            .await?;
        let from = entries(newest)
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_owned(), |(id, _)| id);
        Ok(Signals {
            queue: queue.clone(),
            key,
            from,
            connection: None,
        })
    }

    /// A reader of the stream `key` that starts after the entry `id` (`0-0`: from the first).
    pub(crate) fn after(queue: &RedisQueue, key: String, id: &str) -> Signals {
        Signals {
            queue: queue.clone(),
            key,
            from: id.to_owned(),
            connection: None,
        }
    }

    /// The entries added since the last call, each as its fields; waits up to `block` for
    /// one. Empty when none came, or when Redis could not be read (it is asked again on the
    /// next call, from the same point, on a new connection).
    pub async fn next(&mut self, block: Duration) -> Vec<HashMap<String, String>> {
        let read = self.next_entries(block).await;
        read.into_iter().map(|(_, fields)| fields).collect()
    }

    /// As [`next`](Self::next), each entry with its id.
    pub async fn next_entries(
        &mut self,
        block: Duration,
    ) -> Vec<(String, HashMap<String, String>)> {
        let timeout = self.queue.config().command_timeout;
        if self.connection.is_none() {
            match self
                .queue
                .target()
                .dedicated(timeout, block + timeout)
                .await
            {
                Ok(conn) => self.connection = Some(conn),
                Err(err) => {
                    tracing::debug!(error = %err, stream = %self.key, "cannot connect to read signals");
                    tokio::time::sleep(block).await;
                    return Vec::new();
                }
            }
        }
        let Some(conn) = self.connection.as_mut() else {
            return Vec::new();
        };
        let read: redis::RedisResult<redis::Value> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(BATCH)
            .arg("BLOCK")
            .arg(block.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(&self.from)
            .query_async(conn)
            .await;
        match read {
            Ok(reply) => {
                let read = read_reply(reply);
                if let Some((id, _)) = read.last() {
                    self.from = id.clone();
                }
                read
            }
            Err(err) => {
                tracing::debug!(error = %err, stream = %self.key, "cannot read signals");
                self.connection = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
                Vec::new()
            }
        }
    }
}

/// The entries of an `XREAD` reply of one stream.
fn read_reply(reply: redis::Value) -> Vec<(String, HashMap<String, String>)> {
    let streams = match reply {
        redis::Value::Array(streams) => streams,
        redis::Value::Map(pairs) => pairs.into_iter().map(|(_, entries)| entries).collect(),
        _ => return Vec::new(),
    };
    streams
        .into_iter()
        .flat_map(|stream| match stream {
            // RESP2: [key, entries]; a RESP3 map gives the entries alone.
            redis::Value::Array(mut parts) if parts.len() == 2 => entries(parts.remove(1)),
            entries_only => entries(entries_only),
        })
        .collect()
}

/// The entries of an `XRANGE`-shaped reply: each id with its fields.
fn entries(reply: redis::Value) -> Vec<(String, HashMap<String, String>)> {
    let redis::Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|entry| {
            let redis::Value::Array(mut parts) = entry else {
                return None;
            };
            let fields = parts.pop()?;
            let id: String = redis::from_redis_value(parts.pop()?).ok()?;
            let fields = redis::from_redis_value(fields).unwrap_or_default();
            Some((id, fields))
        })
        .collect()
}

impl WorkerQueue<'_> {
    /// A reader of `jobs:cancel:signals` from now on: the cancel requests made from now.
    pub async fn follow_cancel_requests(&self) -> Result<Signals> {
        let handle = self.handle();
        Signals::after_newest(handle, handle.keys().cancel_signals()).await
    }
}

impl RedisQueue {
    /// The uuids with a pending cancel request (`jobs:cancel`), at most `limit`, newest first.
    pub async fn cancel_requests(&self, limit: usize) -> Result<Vec<String>> {
        self.query(
            redis::cmd("ZREVRANGE")
                .arg(self.keys().cancel_requests())
                .arg(0)
                .arg(limit.saturating_sub(1)),
        )
        .await
    }
}
