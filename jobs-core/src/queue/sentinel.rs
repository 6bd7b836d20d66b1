//! Redis Sentinel: the URL that names a Sentinel-managed primary by its sentinels, and the
//! connection that follows the primary across failovers.
//!
//! `redis+sentinel://[user:password@]host:26379,host:26379/<service>[/<db>]` lists some of the
//! sentinels and the name they know the primary by; `rediss+sentinel://` speaks TLS to the
//! sentinels and to the servers. The user and password are the data servers'; the sentinels'
//! own, when they have them, are the query options `sentinel_username` and
//! `sentinel_password`.
//!
//! Every connection asks the sentinels for the primary when it connects, and the `redis` crate
//! checks that the server it names answers `ROLE` as a primary. A connection that learns of a
//! failover forgets the server it had and asks again on its next command: a dropped or silent
//! connection (the primary died, or a blocked `BLPOP` was cut), a `READONLY` reply (the primary
//! was demoted to a replica), and `UNBLOCKED` or `MASTERDOWN`. A command refused with
//! `READONLY` changed nothing, so it is sent once more to the new primary at once.
//! Before a command, at most once a second, it also asks a sentinel whether its server is still
//! the one named the primary, so that it leaves a server a contested election left answering
//! as a primary.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, Cmd, ConnectionAddr, Pipeline, RedisFuture, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::queue::config::QueueConfig;
use crate::queue::url::{redact_url, tls_certificates, unusable_ca};

/// URL scheme that names a Sentinel-managed primary by some of its sentinels:
/// `redis+sentinel://host:26379,host:26379/mymaster`.
pub const SENTINEL_SCHEME: &str = "redis+sentinel";

/// [`SENTINEL_SCHEME`] over TLS, to the sentinels and to the servers:
/// `rediss+sentinel://host:26379,host:26379/mymaster`.
pub const SENTINEL_TLS_SCHEME: &str = "rediss+sentinel";

/// A primary found through its sentinels: where a [`SentinelConnection`] connects to.
pub struct SentinelTarget {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// A connection to one sentinel, for checking which primary it names.
    asked: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    service: String,
    /// The URL, its passwords hidden: for messages.
    url: String,
}

impl std::fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinel").field("url", &self.url).finish()
    }
}

impl SentinelTarget {
    /// Parses a `redis+sentinel://` or `rediss+sentinel://` URL, with the TLS settings of
    /// `config`; `None` when `url` names no sentinels.
    pub(crate) fn parse(url: &str, config: &QueueConfig) -> Option<Result<SentinelTarget>> {
        let parts = SentinelUrl::split(url)?;
        Some(parts.and_then(|parts| parts.target(url, config)))
    }

    /// The service name the sentinels know the primary by.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// A new connection to the server the sentinels name as the primary now, checked to be
    /// one. Fails with an error that says no primary was found when none is (an election
    /// under way, every sentinel down).
    pub async fn connect(
        &self,
        config: &AsyncConnectionConfig,
    ) -> redis::RedisResult<MultiplexedConnection> {
        Ok(self.connect_to_primary(config).await?.0)
    }

    /// [`SentinelTarget::connect`], with the primary's address (`host:port`).
    async fn connect_to_primary(
        &self,
        config: &AsyncConnectionConfig,
    ) -> redis::RedisResult<(MultiplexedConnection, String)> {
        // Boxed: the sentinels' lookup is a deep future, and connecting is rare.
        let lookup = async { self.sentinels.lock().await.async_get_client().await };
        let client = Box::pin(lookup).await.map_err(|err| self.no_primary(err))?;
        let address = client.get_connection_info().addr().to_string();
        let conn = client
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        Ok((conn, address))
    }

    /// The address (`host:port`) the first sentinel that answers names for the primary now.
    async fn named_primary(&self) -> redis::RedisResult<String> {
        let mut asked = self.asked.lock().await;
        if asked.is_none() {
            let sentinel = self
                .sentinels
                .lock()
                .await
                .async_get_sentinel_client()
                .await?;
            *asked = Some(sentinel.get_multiplexed_async_connection().await?);
        }
        let conn = asked.as_mut().expect("connected above");
        let named = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.service)
            .query_async::<Option<(String, u16)>>(conn)
            .await;
        match named {
            Ok(Some((host, port))) => Ok(format!("{host}:{port}")),
            Ok(None) => Err(self.no_primary(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "the sentinel knows no such service",
            )))),
            Err(err) => {
                *asked = None;
                Err(err)
            }
        }
    }

    fn no_primary(&self, err: redis::RedisError) -> redis::RedisError {
        if err.is_io_error() {
            return err;
        }
        redis::RedisError::from((
            redis::ErrorKind::Io,
            "no sentinel names a reachable primary",
            format!("service {:?} of {}: {err}", self.service, self.url),
        ))
    }
}

/// The parts of a Sentinel URL.
struct SentinelUrl<'u> {
    tls: bool,
    userinfo: Option<&'u str>,
    hosts: Vec<&'u str>,
    service: &'u str,
    db: i64,
    sentinel_username: Option<String>,
    sentinel_password: Option<String>,
}

impl<'u> SentinelUrl<'u> {
    /// Splits `url`; `None` when its scheme is not a Sentinel one.
    fn split(url: &'u str) -> Option<Result<SentinelUrl<'u>>> {
        let (scheme, rest) = url.split_once("://")?;
        let tls = if scheme.eq_ignore_ascii_case(SENTINEL_SCHEME) {
            false
        } else if scheme.eq_ignore_ascii_case(SENTINEL_TLS_SCHEME) {
            true
        } else {
            return None;
        };
        let invalid = |reason: String| Error::InvalidUrl {
            url: redact_url(url),
            source: redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "invalid Sentinel URL",
                reason,
            )),
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
        if hosts.is_empty() {
            return Some(Err(invalid("it names no sentinel (host:port,...)".into())));
        }
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let Some(service) = segments.next() else {
            return Some(Err(invalid(
                "it names no service: redis+sentinel://host:26379,.../<service>[/<db>]".into(),
            )));
        };
        let db = match segments.next() {
            None => 0,
            Some(db) => match db.parse() {
                Ok(db) => db,
                Err(_) => return Some(Err(invalid(format!("the database {db:?} is no number")))),
            },
        };
        if let Some(extra) = segments.next() {
            return Some(Err(invalid(format!("unexpected path segment {extra:?}"))));
        }
        let mut parts = SentinelUrl {
            tls,
            userinfo,
            hosts,
            service,
            db,
            sentinel_username: None,
            sentinel_password: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            match name {
                "sentinel_username" => parts.sentinel_username = Some(value),
                "sentinel_password" => parts.sentinel_password = Some(value),
                other => {
                    return Some(Err(invalid(format!(
                        "unknown option {other:?} (known: sentinel_username, sentinel_password)"
                    ))))
                }
            }
        }
        Some(Ok(parts))
    }

    fn target(self, url: &str, config: &QueueConfig) -> Result<SentinelTarget> {
        let invalid = |source| Error::InvalidUrl {
            url: redact_url(url),
            source,
        };
        let mut sentinels = Vec::with_capacity(self.hosts.len());
        for host in &self.hosts {
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) => (name, port.parse().ok()),
                None => (*host, Some(26379)),
            };
            let Some(port) = port else {
                return Err(invalid(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "invalid Sentinel URL",
                    format!("the port of {host:?} is no number"),
                ))));
            };
            let host = name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            sentinels.push(if self.tls {
                ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host, port)
            });
        }
        let mut builder =
            SentinelClientBuilder::new(sentinels, self.service, SentinelServerType::Master)
                .map_err(invalid)?
                .set_client_to_redis_db(self.db);
        if let Some(userinfo) = self.userinfo {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            if !user.is_empty() {
                builder = builder.set_client_to_redis_username(percent_decode(user));
            }
            if !password.is_empty() {
                builder = builder.set_client_to_redis_password(percent_decode(password));
            }
        }
        if let Some(user) = &self.sentinel_username {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = &self.sentinel_password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if self.tls {
            builder = builder
                .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
        }
        let certificates = tls_certificates(url, config, self.tls)?;
        let with_ca = certificates.is_some();
        if let Some(certificates) = certificates {
            builder = builder
                .set_client_to_redis_certificates(certificates.clone())
                .set_client_to_sentinel_certificates(certificates);
        }
        let client = match builder.build() {
            Ok(client) => client,
            Err(err) if with_ca => return Err(unusable_ca(url, config, err)),
            Err(err) => return Err(invalid(err)),
        };
        Ok(SentinelTarget {
            sentinels: tokio::sync::Mutex::new(client),
            asked: tokio::sync::Mutex::new(None),
            service: self.service.to_owned(),
            url: redact_url(url),
        })
    }
}

/// `%xx` escapes of a URL part decoded (a password may hold any character).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| text.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                at += 3;
            }
            None => {
                decoded.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// A connection to a Sentinel-managed primary that follows it across failovers: it connects
/// on first use, and forgets its server when a reply says the server is gone or no longer
/// the primary, to ask the sentinels again on the next command. Clones share the connection.
///
/// It also asks a sentinel, before a command and at most every [`CHECK_EVERY`], whether the
/// server it talks to is still the one named the primary: after a contested election two
/// servers can answer as primaries for a while, and the one the sentinels do not name will be
/// made a replica, losing what was written to it.
#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    target: Arc<SentinelTarget>,
    config: AsyncConnectionConfig,
    current: Mutex<Option<Current>>,
    /// How many connections were made: each one's generation.
    generations: AtomicU64,
    /// Held while connecting, so that the commands that find no connection make one between
    /// them.
    connecting: tokio::sync::Mutex<()>,
    /// When the sentinels' view was last asked for (ms since `created`), and whether it is
    /// being asked now.
    checked_ms: AtomicU64,
    checking: AtomicBool,
    created: Instant,
}

#[derive(Clone)]
struct Current {
    generation: u64,
    conn: MultiplexedConnection,
    /// The server's address, `host:port`, as the sentinels named it.
    address: String,
}

/// How often a [`SentinelConnection`] in use checks that its server is the primary the
/// sentinels name.
pub const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a command waits for that check's answer before it goes on regardless.
pub const CHECK_WITHIN: std::time::Duration = std::time::Duration::from_millis(200);

impl SentinelConnection {
    /// A connection to the primary of `target`, made on first use.
    pub fn lazy(target: Arc<SentinelTarget>, config: AsyncConnectionConfig) -> Self {
        SentinelConnection {
            shared: Arc::new(Shared {
                target,
                config,
                current: Mutex::new(None),
                generations: AtomicU64::new(0),
                connecting: tokio::sync::Mutex::new(()),
                checked_ms: AtomicU64::new(0),
                checking: AtomicBool::new(false),
                created: Instant::now(),
            }),
        }
    }

    /// A connection to the primary of `target`, made now (an error when none is found).
    pub async fn connect(
        target: Arc<SentinelTarget>,
        config: AsyncConnectionConfig,
    ) -> redis::RedisResult<Self> {
        let connection = SentinelConnection::lazy(target, config);
        connection.connection().await?;
        Ok(connection)
    }

    /// Asks a sentinel which server is the primary, when that was last asked [`CHECK_EVERY`]
    /// ago or more, waiting at most [`CHECK_WITHIN`] for the answer; forgets `current` when
    /// the sentinel names another. Returns whether it did.
    async fn check(&self, current: &Current) -> bool {
        let shared = &self.shared;
        let now_ms = shared.created.elapsed().as_millis() as u64;
        let due = now_ms.saturating_sub(shared.checked_ms.load(Ordering::Relaxed))
            >= CHECK_EVERY.as_millis() as u64;
        if !due || shared.checking.swap(true, Ordering::AcqRel) {
            return false;
        }
        let named = tokio::time::timeout(CHECK_WITHIN, shared.target.named_primary()).await;
        shared.checked_ms.store(now_ms, Ordering::Relaxed);
        shared.checking.store(false, Ordering::Release);
        match named {
            Ok(Ok(named)) if named != current.address => {
                tracing::warn!(
                    service = %shared.target.service,
                    server = %current.address,
                    primary = %named,
                    "the sentinels name another primary than the server in use; switching"
                );
                self.forget(current.generation);
                true
            }
            Ok(Ok(_)) => false,
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "cannot ask a sentinel for the primary");
                false
            }
            Err(_) => false,
        }
    }

    fn current(&self) -> Option<Current> {
        let current = self.shared.current.lock();
        current.unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The connection to the primary, made now when there is none.
    async fn connection(&self) -> redis::RedisResult<Current> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let _connecting = self.shared.connecting.lock().await;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let (conn, address) = self
            .shared
            .target
            .connect_to_primary(&self.shared.config)
            .await?;
        let current = Current {
            generation: self.shared.generations.fetch_add(1, Ordering::Relaxed) + 1,
            conn,
            address,
        };
        *self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(current.clone());
        tracing::debug!(service = %self.shared.target.service, "connected to the primary the sentinels name");
        Ok(current)
    }

    /// Forgets the connection of `generation`, unless a newer one replaced it already.
    fn forget(&self, generation: u64) {
        let mut current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|c| c.generation == generation) {
            tracing::info!(service = %self.shared.target.service, "the primary is gone or demoted; asking the sentinels again");
            *current = None;
        }
    }

    /// Sends one request through the current connection, learning of a failover from its
    /// outcome; a request refused as written to a replica goes once more to the new primary.
    async fn request<T, Fut>(
        &self,
        send: impl Fn(MultiplexedConnection) -> Fut,
        refused_by_replica: impl Fn(&redis::RedisResult<T>) -> bool,
    ) -> redis::RedisResult<T>
    where
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut current = self.connection().await?;
        if self.check(&current).await {
            current = self.connection().await?;
        }
        let reply = send(current.conn).await;
        if refused_by_replica(&reply) {
            self.forget(current.generation);
            let current = self.connection().await?;
            let reply = send(current.conn).await;
            self.learn(current.generation, &reply, &refused_by_replica);
            return reply;
        }
        self.learn(current.generation, &reply, &refused_by_replica);
        reply
    }

    fn learn<T>(
        &self,
        generation: u64,
        reply: &redis::RedisResult<T>,
        refused_by_replica: impl Fn(&redis::RedisResult<T>) -> bool,
    ) {
        let gone = match reply {
            Err(err) => server_gone(err),
            Ok(_) => false,
        };
        if gone || refused_by_replica(reply) {
            self.forget(generation);
        }
    }
}

/// Whether `err` says the server is gone or no longer the primary: the connection is dropped
/// or silent, or the server was demoted.
fn server_gone(err: &redis::RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
        || err.code().is_some_and(demoted)
}

/// Whether an error code says the server is no longer the primary: it refuses writes
/// (`READONLY`), it cut a blocked command as it became a replica (`UNBLOCKED`), or it is a
/// replica whose primary is gone (`MASTERDOWN`).
fn demoted(code: &str) -> bool {
    matches!(code, "READONLY" | "UNBLOCKED" | "MASTERDOWN")
}

/// Whether a reply is an error that says the server is no longer the primary. Server errors
/// come back as replies (`Value::ServerError`), turned into errors only as they are read.
fn refused_as_demoted(value: &Value) -> bool {
    match value {
        Value::ServerError(err) => demoted(err.code()),
        _ => false,
    }
}

/// Whether a command's reply says the server is no longer the primary. `READONLY` and the
/// others change nothing, so the command may be sent again.
fn command_refused(reply: &redis::RedisResult<Value>) -> bool {
    match reply {
        Err(err) => err.code().is_some_and(demoted),
        Ok(value) => refused_as_demoted(value),
    }
}

/// Whether a pipeline's replies hold a refusal that says the server is no longer the
/// primary: the server refused each of its writes, and its reads may go again.
fn pipeline_refused(reply: &redis::RedisResult<Vec<Value>>) -> bool {
    match reply {
        Err(err) => err.code().is_some_and(demoted),
        Ok(values) => values.iter().any(refused_as_demoted),
    }
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.request(
            move |mut conn| async move { conn.req_packed_command(cmd).await },
            command_refused,
        ))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.request(
            move |mut conn| async move { conn.req_packed_commands(cmd, offset, count).await },
            pipeline_refused,
        ))
    }

    fn get_db(&self) -> i64 {
        self.current().map_or(0, |current| current.conn.get_db())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> SentinelUrl<'_> {
        SentinelUrl::split(url)
            .expect("a sentinel URL")
            .expect("valid")
    }

    #[test]
    fn a_sentinel_url_names_its_sentinels_service_and_database() {
        let url = parts("redis+sentinel://app:p%40ss@10.0.0.1:26379,10.0.0.2:26380/mymaster/2?sentinel_password=s3");
        assert!(!url.tls);
        assert_eq!(url.hosts, ["10.0.0.1:26379", "10.0.0.2:26380"]);
        assert_eq!(url.service, "mymaster");
        assert_eq!(url.db, 2);
        assert_eq!(url.userinfo, Some("app:p%40ss"));
        assert_eq!(url.sentinel_password.as_deref(), Some("s3"));
        assert!(parts("rediss+sentinel://h:1/svc").tls);
        assert_eq!(parts("redis+sentinel://h/svc").db, 0);
        assert!(SentinelUrl::split("redis://h:1/0").is_none());
        assert_eq!(percent_decode("p%40ss%2"), "p@ss%2");
    }

    #[test]
    fn a_sentinel_url_without_sentinels_or_service_or_with_unknown_options_is_refused() {
        let config = QueueConfig {
            tls_ca_file: None,
            ..QueueConfig::default()
        };
        for url in [
            "redis+sentinel:///mymaster",
            "redis+sentinel://h:1",
            "redis+sentinel://h:1/svc/x",
            "redis+sentinel://h:1/svc/0/extra",
            "redis+sentinel://h:1/svc?sentinel_pass=x",
            "redis+sentinel://h:port/svc",
        ] {
            let err = SentinelTarget::parse(url, &config)
                .expect("a sentinel URL")
                .expect_err(url);
            assert!(matches!(err, Error::InvalidUrl { .. }), "{url}: {err}");
        }
        let err = SentinelTarget::parse("redis+sentinel://u:secret@/svc", &config)
            .unwrap()
            .unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        let target = SentinelTarget::parse("redis+sentinel://h:1,h:2/svc/1", &config)
            .unwrap()
            .unwrap();
        assert_eq!(target.service(), "svc");
    }
}
