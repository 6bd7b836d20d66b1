//! [`DashboardError`]: why the dashboard cannot run.

use std::net::SocketAddr;

/// Why the dashboard cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashboardError {
    /// `--auth` is not `user:password`.
    #[error("--auth must be user:password, with a user and a password")]
    InvalidAuth,
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("the dashboard server failed: {0}")]
    Serve(std::io::Error),
}
