//! The errors of dispatching and queue operations.

use std::time::Duration;

/// What can go wrong talking to the queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Redis URL could not be parsed.
    #[error("invalid Redis URL {url:?}: {source}")]
    InvalidUrl {
        /// The URL as given, its password hidden.
        url: String,
        /// Why it was rejected.
        source: redis::RedisError,
    },
    /// Redis refused the user name or password of the URL (`WRONGPASS`, `NOAUTH`).
    #[error(
        "Redis refused the credentials: check the user name and password in the Redis URL \
         ({0})"
    )]
    AuthenticationFailed(#[source] redis::RedisError),
    /// Redis's access control list denies a command this user needs (`NOPERM`).
    #[error("Redis denies a command this needs: grant the Redis user the queue's commands ({0})")]
    NotPermitted(#[source] redis::RedisError),
    /// The TLS handshake with Redis failed: a certificate that is not trusted or does not
    /// match, or a server that does not speak TLS.
    #[error("the TLS handshake with Redis failed: check the CA certificate and the URL ({0})")]
    TlsHandshake(#[source] redis::RedisError),
    /// The server is too old to serve the queue.
    #[error("Redis 6.2 or later is needed (LPOP with a count), and this server is {version}")]
    UnsupportedServer {
        /// The server's `redis_version`.
        version: String,
    },
    /// The CA certificate file of [`QueueConfig::tls_ca_file`](crate::QueueConfig) could not
    /// be read.
    #[error("cannot read the TLS CA certificate file {path:?}: {source}")]
    TlsCaFile {
        /// The file's path.
        path: std::path::PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The TLS settings cannot be used: a CA certificate for a URL that is not `rediss://`,
    /// or a CA file that holds no usable PEM certificate.
    #[error("invalid TLS settings for Redis URL {url:?}: {reason}")]
    InvalidTls {
        /// The URL, its password hidden.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A handle was opened outside a Tokio runtime; its connection needs one.
    #[error("a Redis handle must be opened inside a Tokio runtime")]
    NoRuntime,
    /// Redis could not be reached (connection refused, reset or closed).
    #[error("Redis is unreachable: {0}")]
    Unreachable(#[source] redis::RedisError),
    /// Redis did not answer within the configured command timeout.
    #[error("Redis did not answer within {0:?}")]
    Timeout(Duration),
    /// Redis answered with an error, or with a reply of an unexpected shape.
    #[error("Redis command failed: {0}")]
    Redis(#[source] redis::RedisError),
    /// The job could not be turned into JSON.
    #[error("cannot serialize job {job}: {source}")]
    Serialize {
        /// The job's registered name.
        job: &'static str,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// A payload pushed through a handle with a signing key is not a job payload, so it
    /// cannot be signed.
    #[error("cannot sign the payload of job {job}: it is not a job payload ({source})")]
    Unsignable {
        /// The job's registered name.
        job: String,
        /// Why the payload could not be read.
        source: serde_json::Error,
    },
    /// A queue name no worker could take jobs from (see [`check_queue_name`](crate::queue::keys::check_queue_name)).
    #[error(transparent)]
    InvalidQueueName(#[from] InvalidQueueName),
    /// A group name that could be taken for another key's (see
    /// [`check_group_name`](crate::queue::keys::check_group_name)).
    #[error(transparent)]
    InvalidGroupName(#[from] InvalidGroupName),
    /// A unique job's lock is held by another job: nothing was pushed.
    #[error(transparent)]
    Duplicate(#[from] crate::payload::unique::Duplicate),
    /// A job that cannot be part of a chain or a batch: a unique or debounced job, whose
    /// push may be refused or replaced.
    #[error("job {job} cannot be part of a chain or a batch: it is {kind}")]
    NotInWorkflow {
        /// The job's registered name.
        job: &'static str,
        /// `"unique"` or `"debounced"`.
        kind: &'static str,
    },
    /// A chain or batch that cannot be built as asked.
    #[error("invalid workflow: {0}")]
    InvalidWorkflow(&'static str),
    /// The payload is larger than the configured maximum.
    #[error("payload of job {job} is {size} bytes, over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The job's registered name.
        job: String,
        /// The payload's size in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// A durable write was acknowledged by the primary, but fewer replicas than asked
    /// confirmed it in time: it may or may not survive a failover (see
    /// [`crate::queue::durability`]).
    #[error("{0}")]
    NotDurable(crate::queue::durability::NotDurable),
    /// No schedule of this name is defined in this process.
    #[error("no schedule named {0:?} is defined")]
    UnknownSchedule(String),
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        if err.kind() == redis::ErrorKind::AuthenticationFailed
            || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
        {
            Error::AuthenticationFailed(err)
        } else if err.code() == Some("NOPERM") {
            Error::NotPermitted(err)
        } else if is_tls_failure(&err) {
            Error::TlsHandshake(err)
        } else if err.is_timeout()
            || err.is_io_error()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
        {
            Error::Unreachable(err)
        } else {
            Error::Redis(err)
        }
    }
}

impl Error {
    /// Whether the error comes from the configuration (a malformed URL, refused credentials,
    /// a command the ACL denies, TLS that cannot work, too old a server) rather than from the
    /// moment: trying again cannot help, so a worker refuses to start on one.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            Error::InvalidUrl { .. }
                | Error::AuthenticationFailed(_)
                | Error::NotPermitted(_)
                | Error::TlsHandshake(_)
                | Error::TlsCaFile { .. }
                | Error::InvalidTls { .. }
                | Error::UnsupportedServer { .. }
        )
    }
}

/// Whether a connection failed in its TLS handshake for a reason that lasts: a certificate
/// rustls does not trust (`invalid peer certificate`), or a server that does not speak TLS
/// (`received corrupt message`). A handshake cut short (a server restarting) is not one.
/// redis-rs keeps the I/O error only as text.
fn is_tls_failure(err: &redis::RedisError) -> bool {
    if !err.is_io_error() {
        return false;
    }
    let text = err.to_string().to_ascii_lowercase();
    ["certificate", "corrupt message"]
        .iter()
        .any(|sign| text.contains(sign))
}

/// The result of queue operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A group name that could be taken for another key's, refused before anything is written
/// under it (see [`check_group_name`](crate::queue::keys::check_group_name)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid group name {group:?}: {reason}")]
pub struct InvalidGroupName {
    /// The name as given.
    pub group: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}

/// A name no worker could take jobs from, refused before anything is written under it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid queue name {name:?}: {reason}")]
pub struct InvalidQueueName {
    /// The name as given.
    pub name: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}
