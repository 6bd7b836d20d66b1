//! [`DashboardError`]: why the dashboard cannot run.

use std::net::SocketAddr;

/// Why the dashboard cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashboardError {
    /// `--auth` or `--read-only-auth` (named) is not `user:password`.
    #[error("{0} must be user:password, with a user and a password")]
    InvalidAuth(&'static str),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Asked to listen beyond loopback without `--auth`, and without
    /// `--insecure-without-auth` to accept the risk.
    #[error(
        "refusing to listen on {addr} without --auth: anyone who can reach it could retry, \
         delete and cancel jobs and pause queues. Give --auth user:password (or \
         JOBS_DASHBOARD_AUTH), listen on loopback and tunnel to it, or pass \
         --insecure-without-auth to accept that risk"
    )]
    Unauthenticated {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The server failed while running.
    #[error("the dashboard server failed: {0}")]
    Serve(std::io::Error),
}
