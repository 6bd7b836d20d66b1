//! What can stop a `jobsctl` command.

use redjob::admin::AdminError;

/// What can stop a command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(super) enum CliError {
    /// An operation on Redis failed.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The arguments cannot be acted on.
    #[error("{0}")]
    Invalid(String),
    /// Some of what was asked for was not done.
    #[error("{0}")]
    Incomplete(String),
    /// The terminal could not be read or written.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
    /// The dashboard could not run.
    #[error(transparent)]
    Dashboard(#[from] super::dashboard::DashboardError),
}
