//! Commands over keys of many slots: what the operators' tools and the workers' published
//! state need on a Redis Cluster, where a pipeline must stay within one slot and `SCAN` walks
//! one node.
//!
//! On one server both are what they look like: one pipeline, one `SCAN` loop. On a cluster a
//! batch of commands is sent one command each, all at once (each node's connection is
//! multiplexed, so they still share round trips), and a key scan walks every primary in turn.

use futures_util::future::try_join_all;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue, Value};

use crate::error::Result;
use crate::queue::connection::Connection;
use crate::queue::handle::RedisQueue;

/// Most commands sent at once, and most keys a `SCAN` step asks a node for.
const STEP: usize = 1000;

impl RedisQueue {
    /// Sends `commands`, which may touch keys of different cluster slots, and returns each
    /// one's reply in order: one pipeline on one server; on a cluster, each command to the
    /// node that owns its key, all in flight together. Not atomic: a command that fails fails
    /// the whole call, and the others may have been carried out.
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue) -> Result<(), redjob::Error> {
    /// use redjob::redis;
    /// let mut commands = Vec::new();
    /// for name in ["emails", "billing"] {
    ///     commands.push(redis::cmd("LLEN").arg(&queue.queue_keys(name).ready).clone());
    /// }
    /// let lengths: Vec<u64> = queue.query_each(&commands).await?;
    /// # let _ = lengths; Ok(()) }
    /// ```
    pub async fn query_each<T: FromRedisValue>(&self, commands: &[Cmd]) -> Result<T> {
        let mut replies = Vec::with_capacity(commands.len());
        for step in commands.chunks(STEP) {
            let conn = self.connection();
            let sent = async {
                match conn {
                    Connection::Cluster(_) => {
                        try_join_all(step.iter().map(|cmd| {
                            let mut conn = conn.clone();
                            async move { cmd.query_async::<Value>(&mut conn).await }
                        }))
                        .await
                    }
                    mut conn => {
                        let mut pipe = redis::pipe();
                        for cmd in step {
                            pipe.add_command(cmd.clone());
                        }
                        pipe.query_async::<Vec<Value>>(&mut conn).await
                    }
                }
            };
            replies.extend(self.timed(sent).await?);
        }
        Ok(redis::from_redis_value(Value::Array(replies)).map_err(redis::RedisError::from)?)
    }

    /// Every key matching `pattern`, and of the type `kind` when given (`"list"`, `"zset"`,
    /// ...), by `SCAN` in steps of at most a thousand keys: on a cluster, on each primary in
    /// turn.
    pub async fn scan_keys(&self, pattern: &str, kind: Option<&str>) -> Result<Vec<String>> {
        let (keys, _) = self
            .scan_from(pattern, kind, KeyScan::START, usize::MAX, None)
            .await?;
        Ok(keys)
    }

    /// Keys of a key scan from `at` (see [`RedisQueue::scan_keys`]), step by step until about
    /// `want` were found (`SCAN` steps of that size: the last one can give more), the scan
    /// ended, or `budget` ran out; with where it goes on, or `None` at its end. As `SCAN` gives
    /// them, a key may come in two steps.
    pub(crate) async fn scan_from(
        &self,
        pattern: &str,
        kind: Option<&str>,
        mut at: KeyScan,
        want: usize,
        budget: Option<std::time::Duration>,
    ) -> Result<(Vec<String>, Option<KeyScan>)> {
        let nodes = self.primaries().await?;
        let started = tokio::time::Instant::now();
        let count = want.clamp(1, STEP);
        let mut keys = Vec::new();
        loop {
            let (found, next) = self.scan_step_on(&nodes, pattern, kind, at, count).await?;
            keys.extend(found);
            let spent = budget.is_some_and(|budget| started.elapsed() >= budget);
            match next {
                Some(next) if keys.len() < want && !spent => at = next,
                next => return Ok((keys, next)),
            }
        }
    }

    async fn scan_step_on(
        &self,
        nodes: &[Node],
        pattern: &str,
        kind: Option<&str>,
        at: KeyScan,
        count: usize,
    ) -> Result<(Vec<String>, Option<KeyScan>)> {
        let Some(node) = nodes.get(at.node) else {
            return Ok((Vec::new(), None));
        };
        let mut scan = redis::cmd("SCAN");
        scan.arg(at.cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count.max(1));
        if let Some(kind) = kind {
            scan.arg("TYPE").arg(kind);
        }
        let (cursor, found): (u64, Vec<String>) = self.query_on(node, scan).await?;
        let next = match (cursor, at.node + 1 < nodes.len()) {
            (0, false) => None,
            (0, true) => Some(KeyScan {
                node: at.node + 1,
                cursor: 0,
            }),
            (cursor, _) => Some(KeyScan {
                node: at.node,
                cursor,
            }),
        };
        Ok((found, next))
    }

    /// The nodes a key scan must visit: the one server, or each primary of a cluster (by
    /// `CLUSTER SLOTS`, as the cluster client learns them).
    async fn primaries(&self) -> Result<Vec<Node>> {
        let Connection::Cluster(mut conn) = self.connection() else {
            return Ok(vec![Node::Only]);
        };
        let slots = self
            .timed(conn.route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            ))
            .await?;
        let ranges: Vec<(i64, i64, (String, u16))> =
            redis::from_redis_value(trim_ranges(slots)).map_err(redis::RedisError::from)?;
        let mut nodes: Vec<Node> = Vec::new();
        for (_, _, (host, port)) in ranges {
            let node = Node::Primary { host, port };
            if !nodes.contains(&node) {
                nodes.push(node);
            }
        }
        Ok(nodes)
    }

    /// Runs `cmd` on one node and decodes its reply.
    async fn query_on<T: redis::FromRedisValue>(&self, node: &Node, cmd: Cmd) -> Result<T> {
        let reply = match (node, self.connection()) {
            (Node::Primary { host, port }, Connection::Cluster(mut conn)) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                self.timed(conn.route_command(cmd, route)).await?
            }
            (_, mut conn) => self.timed(cmd.query_async::<Value>(&mut conn)).await?,
        };
        Ok(redis::from_redis_value(reply).map_err(redis::RedisError::from)?)
    }
}

/// A node a command can be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// The server of a handle on one server.
    Only,
    /// A cluster's primary, by the address the cluster gives it.
    Primary { host: String, port: u16 },
}

/// `CLUSTER SLOTS` entries cut to start, end and the primary's host and port: each entry
/// goes on with the primary's id, its replicas and, in Redis 7, a map of more fields.
fn trim_ranges(reply: Value) -> Value {
    let Value::Array(ranges) = reply else {
        return reply;
    };
    Value::Array(
        ranges
            .into_iter()
            .map(|range| match range {
                Value::Array(mut fields) if fields.len() >= 3 => {
                    fields.truncate(3);
                    if let Value::Array(primary) = &mut fields[2] {
                        primary.truncate(2);
                    }
                    Value::Array(fields)
                }
                other => other,
            })
            .collect(),
    )
}

/// Where a key scan is: which node (by its place among the primaries, always 0 on one server)
/// and that node's `SCAN` cursor. Written `<node>:<cursor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyScan {
    node: usize,
    cursor: u64,
}

impl KeyScan {
    /// The start of a scan.
    pub(crate) const START: KeyScan = KeyScan { node: 0, cursor: 0 };

    /// Reads a scan position as [`KeyScan`]'s `Display` wrote it.
    pub(crate) fn parse(text: &str) -> Option<KeyScan> {
        let (node, cursor) = text.split_once(':')?;
        Some(KeyScan {
            node: node.parse().ok()?,
            cursor: cursor.parse().ok()?,
        })
    }
}

impl std::fmt::Display for KeyScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.node, self.cursor)
    }
}
