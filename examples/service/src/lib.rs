//! An order service, as a Rust service built on this queue would be: an axum API on
//! PostgreSQL (sqlx) that takes orders and queues their jobs, and jobs that read and update the
//! orders' rows through the same pool, given to the workers as state.
//!
//! - `orders-service` serves the API and runs workers embedded in the same process;
//!   `orders-service --no-worker` serves the API alone.
//! - `orders-worker` is a worker binary with every option of the queue's worker
//!   (`--queue orders,shipping --concurrency 20 ...`), for running the jobs on other hosts.
//!
//! Both read their settings from the environment ([`Settings`]). See `docs/service.md`.

pub mod api;
pub mod carrier;
pub mod jobs;
pub mod orders;

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use crate::orders::MIGRATOR;

/// What the service reads from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `DATABASE_URL`: the PostgreSQL database (required).
    pub database_url: String,
    /// `CARRIER_URL`: the carrier's shipping API (required).
    pub carrier_url: String,
    /// `REDIS_URL`: the queue's Redis (`redis://127.0.0.1:6379/` when unset).
    pub redis_url: String,
    /// `LISTEN`: the API's address (`127.0.0.1:3000` when unset).
    pub listen: String,
}

/// A setting the environment lacks.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not set")]
pub struct MissingSetting(&'static str);

impl Settings {
    /// The settings from the environment.
    pub fn from_env() -> Result<Settings, MissingSetting> {
        let required = |name: &'static str| std::env::var(name).map_err(|_| MissingSetting(name));
        let optional =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        Ok(Settings {
            database_url: required("DATABASE_URL")?,
            carrier_url: required("CARRIER_URL")?,
            redis_url: optional("REDIS_URL", redjob::queue::DEFAULT_REDIS_URL),
            listen: optional("LISTEN", "127.0.0.1:3000"),
        })
    }
}

/// The service's pool: connected to `database_url`, its tables brought up to date, the job
/// outbox included.
pub async fn connect_database(database_url: &str) -> Result<PgPool, sqlx::Error> {
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(5))
        .connect(database_url)
        .await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}
