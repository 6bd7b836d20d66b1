//! The connections a [`RedisQueue`](crate::RedisQueue) talks through: to one Redis server, to
//! a Sentinel-managed primary, or to a Redis Cluster, behind one type.
//!
//! Every queue operation is written once against [`Connection`], which implements
//! `redis::aio::ConnectionLike`, so `redis::AsyncCommands`, pipelines and scripts work on it
//! whatever is behind it. A cluster connection routes each command to the node that owns its
//! keys' slot and follows the cluster when slots move.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::queue::config::QueueConfig;
use crate::queue::keys::KeyLayout;
use crate::queue::sentinel::{SentinelConnection, SentinelTarget};
use crate::queue::url::{redact_url, redis_client, tls_certificates, unusable_ca};

/// URL scheme that names a Redis Cluster by some of its nodes:
/// `redis+cluster://host:port,host:port/`.
pub const CLUSTER_SCHEME: &str = "redis+cluster";

/// [`CLUSTER_SCHEME`] over TLS: `rediss+cluster://host:port,host:port/`.
pub const CLUSTER_TLS_SCHEME: &str = "rediss+cluster";

/// A connection to one Redis server, to a Sentinel-managed primary, or to a Redis Cluster.
#[derive(Clone)]
pub enum Connection {
    /// The shared, self-reconnecting connection to one server.
    Managed(ConnectionManager),
    /// The shared connection to the primary its sentinels name, which follows it across
    /// failovers.
    Sentinel(SentinelConnection),
    /// A dedicated connection to one server (a blocking wait has one of its own).
    Multiplexed(MultiplexedConnection),
    /// A connection to a cluster: one multiplexed connection per node, commands routed by slot.
    Cluster(ClusterConnection),
    /// No connection: an offline handle's (a fake queue of [`crate::testing`]), which hands
    /// its pushes to a sink instead. Every command sent through it fails, saying so.
    Offline,
}

/// The error every command sent through an offline handle's connection meets.
fn offline_refusal() -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "a fake queue (redjob::testing) records dispatches and talks to no Redis",
        "this operation needs a real Redis: open a RedisQueue for it".to_owned(),
    ))
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Managed(conn) => conn.req_packed_command(cmd),
            Connection::Sentinel(conn) => conn.req_packed_command(cmd),
            Connection::Multiplexed(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
            Connection::Offline => Box::pin(async { Err(offline_refusal()) }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Managed(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Sentinel(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Multiplexed(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Offline => Box::pin(async { Err(offline_refusal()) }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Managed(conn) => conn.get_db(),
            Connection::Sentinel(conn) => conn.get_db(),
            Connection::Multiplexed(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
            Connection::Offline => 0,
        }
    }
}

/// Where a [`RedisQueue`](crate::RedisQueue) connects to, parsed from its URL.
// One per handle, built once and rarely moved: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Target {
    /// One server: `redis://`, `rediss://`, `unix://`, ...
    Single(redis::Client),
    /// The primary that Redis Sentinel names:
    /// `redis+sentinel://h1:26379,h2:26379/mymaster`.
    Sentinel(Arc<SentinelTarget>),
    /// A Redis Cluster, found through its seed nodes: `redis+cluster://h1:p1,h2:p2/`.
    Cluster(ClusterClient),
    /// No Redis: an offline handle's, whose pushes go to a sink (a fake queue of
    /// [`crate::testing`]).
    Offline,
}

impl Target {
    /// Parses `url`, with the TLS settings of `config`. A `redis+cluster://` (or
    /// `rediss+cluster://`) URL lists one or more seed nodes of a cluster, separated by commas;
    /// user, password, path and query apply to each. A `redis+sentinel://` (or
    /// `rediss+sentinel://`) URL lists sentinels and names the service they watch
    /// ([`crate::queue::sentinel`]). Any other URL names one server ([`redis_client`]).
    ///
    /// ```
    /// use redjob::queue::connection::Target;
    /// use redjob::queue::keys::KeyLayout;
    /// use redjob::QueueConfig;
    /// let config = QueueConfig::default();
    /// let target = Target::parse("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/", &config);
    /// assert_eq!(target.unwrap().layout(), KeyLayout::Cluster);
    /// let target = Target::parse("redis://127.0.0.1:6379/", &config).unwrap();
    /// assert_eq!(target.layout(), KeyLayout::Standalone);
    /// ```
    pub fn parse(url: &str, config: &QueueConfig) -> Result<Target> {
        if let Some(sentinel) = SentinelTarget::parse(url, config) {
            return sentinel.map(|target| Target::Sentinel(Arc::new(target)));
        }
        let Some(seeds) = cluster_seeds(url) else {
            return redis_client(url, config).map(Target::Single);
        };
        let invalid = |source| Error::InvalidUrl {
            url: redact_url(url),
            source,
        };
        let seeds = seeds.map_err(invalid)?;
        let tls = seeds[0].starts_with("rediss:");
        let mut builder = ClusterClient::builder(seeds);
        let certificates = tls_certificates(url, config, tls)?;
        let with_ca = certificates.is_some();
        if let Some(certificates) = certificates {
            builder = builder.certs(certificates);
        }
        match builder.build() {
            Ok(client) => Ok(Target::Cluster(client)),
            Err(err) if with_ca => Err(unusable_ca(url, config, err)),
            Err(err) => Err(invalid(err)),
        }
    }

    /// The key layout this target needs.
    pub fn layout(&self) -> KeyLayout {
        match self {
            Target::Single(_) | Target::Sentinel(_) | Target::Offline => KeyLayout::Standalone,
            Target::Cluster(_) => KeyLayout::Cluster,
        }
    }

    /// A connection of its own, not shared with the queue's other operations, whose replies
    /// may take up to `response_timeout`: for blocking commands such as `BLPOP`. Through
    /// Sentinel, it follows the primary as the shared connection does (a blocked command
    /// learns of a failover when it fails or ends).
    pub async fn dedicated(
        &self,
        connection_timeout: Duration,
        response_timeout: Duration,
    ) -> redis::RedisResult<Connection> {
        match self {
            Target::Single(client) => {
                let config = with_timeouts(connection_timeout, response_timeout);
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(Connection::Multiplexed)
            }
            Target::Sentinel(target) => {
                let config = with_timeouts(connection_timeout, response_timeout);
                SentinelConnection::connect(target.clone(), config)
                    .await
                    .map(Connection::Sentinel)
            }
            Target::Cluster(client) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(connection_timeout)
                    .set_response_timeout(response_timeout);
                client
                    .get_async_connection_with_config(config)
                    .await
                    .map(Connection::Cluster)
            }
            Target::Offline => Err(offline_refusal()),
        }
    }

    /// A connection of its own, as [`Target::dedicated`], that stays with the server it was
    /// made to: through Sentinel, to the primary named now, never switching to another (its
    /// owner drops it on an error). What a `WAIT` covers needs it: a `WAIT` sent on another
    /// server would confirm none of the writes made on the first. On one server and on a
    /// cluster, the same as [`Target::dedicated`].
    pub async fn pinned(
        &self,
        connection_timeout: Duration,
        response_timeout: Duration,
    ) -> redis::RedisResult<Connection> {
        match self {
            Target::Sentinel(target) => {
                let config = with_timeouts(connection_timeout, response_timeout);
                target.connect(&config).await.map(Connection::Multiplexed)
            }
            _ => self.dedicated(connection_timeout, response_timeout).await,
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Single(client) => f
                .debug_tuple("Single")
                .field(&client.get_connection_info().addr())
                .finish(),
            Target::Sentinel(target) => target.fmt(f),
            Target::Cluster(_) => f.write_str("Cluster"),
            Target::Offline => f.write_str("Offline"),
        }
    }
}

/// A connection's settings with these timeouts.
pub(crate) fn with_timeouts(
    connection_timeout: Duration,
    response_timeout: Duration,
) -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connection_timeout))
        .set_response_timeout(Some(response_timeout))
}

/// The seed node URLs of a cluster URL; `None` when `url` does not name a cluster.
fn cluster_seeds(url: &str) -> Option<redis::RedisResult<Vec<String>>> {
    let (scheme, rest) = url.split_once("://")?;
    let node_scheme = if scheme.eq_ignore_ascii_case(CLUSTER_SCHEME) {
        "redis"
    } else if scheme.eq_ignore_ascii_case(CLUSTER_TLS_SCHEME) {
        "rediss"
    } else {
        return None;
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    let seeds: Vec<String> = hosts
        .split(',')
        .filter(|host| !host.is_empty())
        .map(|host| format!("{node_scheme}://{userinfo}{host}{tail}"))
        .collect();
    if seeds.is_empty() {
        return Some(Err(redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "a cluster URL names at least one node",
        ))));
    }
    Some(Ok(seeds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_url_lists_its_seed_nodes() {
        let seeds = cluster_seeds("redis+cluster://user:pw@10.0.0.1:7000,10.0.0.2:7001/?x=1")
            .unwrap()
            .unwrap();
        assert_eq!(
            seeds,
            [
                "redis://user:pw@10.0.0.1:7000/?x=1",
                "redis://user:pw@10.0.0.2:7001/?x=1"
            ]
        );
        let seeds = cluster_seeds("rediss+cluster://h:1").unwrap().unwrap();
        assert_eq!(seeds, ["rediss://h:1"]);
        assert!(cluster_seeds("redis://127.0.0.1:6379").is_none());
        assert!(cluster_seeds("redis+cluster:///").unwrap().is_err());
    }

    #[test]
    fn urls_parse_to_their_targets() {
        let config = QueueConfig {
            tls_ca_file: None,
            ..QueueConfig::default()
        };
        assert!(matches!(
            Target::parse("redis+cluster://127.0.0.1:7000", &config).unwrap(),
            Target::Cluster(_)
        ));
        assert!(matches!(
            Target::parse("redis://127.0.0.1:7000", &config).unwrap(),
            Target::Single(_)
        ));
        assert!(Target::parse("redis+cluster://", &config).is_err());
        let error = Target::parse("redis+cluster://u:secret@", &config).unwrap_err();
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
