//! Test harness: a private `redis-server` per test, waiting helpers, and drivers for the
//! workspace's binaries: the worker ([`worker_process`]), the `jobsctl` command
//! ([`jobs_command`]) and its dashboard ([`dashboard`]), with a small HTTP client ([`http`])
//! for the dashboard and the worker's Prometheus endpoint. [`monitor`] records every command a
//! test server runs, for tests of what a step asks of Redis and in which order.
//!
//! Every test starts its own [`TestRedis`] (tests run in parallel, each on its own port), and
//! waits for conditions with [`wait_until`] / [`wait_for`] instead of sleeping.
//! [`TestRedis::start_tls`] starts a server that speaks only TLS, with a CA made for it.
//! [`cluster::TestCluster`] starts a Redis Cluster of three primaries, and [`Server`] is either
//! kind, for tests that run on both layouts ([`on_both_layouts!`]). [`TestPostgres`] starts a
//! private PostgreSQL cluster, for the tests of code that keeps its data there.
//!
//! ```no_run
//! # async fn demo() {
//! let redis = tests::TestRedis::start();
//! let queue = redis.queue();
//! let mut conn = redis.conn().await;
//! # let _ = (queue, &mut conn);
//! # }
//! ```

mod dispatch;
mod json;
mod postgres_server;
mod redis_server;
mod server;
mod temp_dir;
mod tls;
mod wait;

pub mod cluster;
pub mod dashboard;
pub mod failed_store;
pub mod http;
pub mod jobs_command;
pub mod monitor;
pub mod otlp;
pub mod protocol;
pub mod records;
pub mod scenarios;
pub mod sentinel;
pub mod steps;
pub mod worker_process;

pub use dispatch::{sent_in_bulk, SentVia, TrackedVia};
pub use json::json_fields;
pub use postgres_server::{kept_rows, outbox_rows, TestPostgres, POSTGRES_MISSING};
pub use redis_server::{free_port, server_time, TestRedis, CLOSED_PORT, REDIS_SERVER_MISSING};
pub use server::{RedisUnderTest, Server};
pub use wait::{
    blocked_in_blpop, wait_for, wait_for_empty_queue, wait_for_idle_worker, wait_until,
};
