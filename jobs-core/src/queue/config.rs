//! [`QueueConfig`]: the settings of a [`RedisQueue`](crate::RedisQueue).

use crate::queue::durability::Durability;
use std::path::PathBuf;
use std::time::Duration;

use crate::payload::encrypted::LaravelKey;
use crate::payload::signing::SigningKey;

/// The environment variable [`QueueConfig::default`] reads the TLS CA certificate file from.
pub const TLS_CA_FILE_ENV: &str = "REDIS_TLS_CA_FILE";

/// The environment variable [`QueueConfig::default`] reads the key prefix from, as Laravel's
/// `REDIS_PREFIX`.
pub const PREFIX_ENV: &str = "REDIS_PREFIX";

/// Settings of a [`RedisQueue`](crate::RedisQueue).
///
/// The credentials and TLS come from the URL: `redis://user:password@host:6379/0` logs in
/// with Redis AUTH (an ACL user, or only `:password@` for `requirepass`), and `rediss://`
/// connects over TLS, verifying the server's certificate against the system's trusted
/// certificates, or against [`QueueConfig::tls_ca_file`] when it is set.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// The longest any one Redis call may take before it fails with [`Error::Timeout`](crate::error::Error::Timeout)
    /// (default 5 s). Dispatch never waits longer than this.
    pub command_timeout: Duration,
    /// The largest payload accepted, in bytes (default 4 MiB). Dispatch refuses a larger one
    /// with [`Error::PayloadTooLarge`](crate::error::Error::PayloadTooLarge); a worker fails a larger one it reserves without
    /// decoding it.
    pub max_payload_bytes: usize,
    /// How many failed jobs the failed-job store keeps at most (default 10,000).
    pub failed_max_jobs: u64,
    /// How long the failed-job store keeps a failed job (default 180 days).
    pub failed_max_age: Duration,
    /// The connection name written into failed-job records (default `"redis"`).
    pub connection_name: String,
    /// The key that signs every pushed payload and, in a worker, must have signed every
    /// payload it runs (see [`crate::payload::signing`]). Default: the key in `JOBS_SIGNING_KEY`
    /// ([`crate::payload::signing::SIGNING_KEY_ENV`]), or none.
    pub signing_key: Option<SigningKey>,
    /// A PEM file of the CA certificates that a `rediss://` server's certificate must chain
    /// to, instead of the system's trusted certificates. Default: the path in
    /// `REDIS_TLS_CA_FILE` ([`TLS_CA_FILE_ENV`]), or none. It is read when the handle is
    /// created; setting it for a `redis://` URL is an error ([`Error::InvalidTls`](crate::error::Error::InvalidTls)).
    pub tls_ca_file: Option<PathBuf>,
    /// The prefix put before every key this handle reads or writes, to share queues with a
    /// Laravel app whose Redis connection has one (`database.redis.options.prefix`, by
    /// default `<app>_database_`). Default: the value of `REDIS_PREFIX`
    /// ([`PREFIX_ENV`]), or none.
    pub prefix: String,
    /// The Laravel app's key, with which a worker reads the job classes the app queues
    /// encrypted (`ShouldBeEncrypted`). Default: the key in `APP_KEY`
    /// ([`crate::payload::encrypted::APP_KEY_ENV`]), or none.
    pub laravel_key: Option<LaravelKey>,
    /// How long a finished batch's record is kept (default 7 days); `jobsctl batches prune`
    /// deletes finished batches sooner.
    pub batch_retention: Duration,
    /// The durability of every dispatch through this handle that does not set its own
    /// ([`PendingDispatch::durable`](crate::PendingDispatch::durable)): how many replicas must
    /// have a push before it is acknowledged (default [`Durability::NONE`]: the primary
    /// alone). See [`crate::queue::durability`].
    pub durability: Durability,
}

impl Default for QueueConfig {
    /// The defaults listed on each field; `signing_key`, `tls_ca_file`, `prefix` and
    /// `laravel_key` come from the environment.
    fn default() -> Self {
        QueueConfig {
            command_timeout: Duration::from_secs(5),
            max_payload_bytes: 4 * 1024 * 1024,
            failed_max_jobs: 10_000,
            failed_max_age: Duration::from_secs(180 * 24 * 3600),
            connection_name: "redis".to_owned(),
            signing_key: SigningKey::from_env(),
            tls_ca_file: std::env::var_os(TLS_CA_FILE_ENV)
                .filter(|path| !path.is_empty())
                .map(PathBuf::from),
            prefix: std::env::var(PREFIX_ENV).unwrap_or_default(),
            laravel_key: LaravelKey::from_env(),
            batch_retention: Duration::from_secs(7 * 24 * 3600),
            durability: Durability::NONE,
        }
    }
}
