//! `jobsctl dashboard`: a live web page over the same [`Admin`] library as the `jobsctl` command.
//!
//! The page (`assets/`, embedded in the binary) polls the JSON endpoints of [`router`] every
//! 2 seconds: throughput over the last hour, queues with pause and resume, failed jobs with
//! search, detail, retry and forget, live workers, and each queue's recent jobs.
//!
//! Safe by default: it listens on loopback unless told otherwise (and beyond it only with
//! credentials, or a flag that accepts the risk), `--auth user:password` puts every request
//! behind HTTP basic auth, `--read-only-auth` lets other credentials read without changing
//! anything, and every change is a POST that a page of another site cannot make ([`guard`]).
//! `docs/operations.md` describes it.

mod api;
mod error;
pub mod guard;

pub use error::DashboardError;

use axum::Router;
use clap::Args;
use redjob::admin::Admin;
use std::net::SocketAddr;
use std::sync::Arc;

/// The environment variable that can hold `--auth`.
pub const AUTH_ENV: &str = "JOBS_DASHBOARD_AUTH";

/// The environment variable that can hold `--read-only-auth`.
pub const READ_ONLY_AUTH_ENV: &str = "JOBS_DASHBOARD_READ_ONLY_AUTH";

/// `jobsctl dashboard`'s options.
#[derive(Debug, Clone, Args)]
pub struct DashboardArgs {
    /// Address to listen on. Loopback by default: anyone who can reach the dashboard can
    /// retry and forget failed jobs and pause queues, so listening wider needs --auth (or
    /// --insecure-without-auth).
    #[arg(long, default_value = "127.0.0.1:9900")]
    pub listen: SocketAddr,

    /// Require HTTP basic auth with these credentials, as user:password.
    #[arg(long, env = AUTH_ENV, hide_env_values = true)]
    pub auth: Option<String>,

    /// Also let these credentials (user:password) in, to read only: every page and listing,
    /// and no change (403).
    #[arg(long, env = READ_ONLY_AUTH_ENV, hide_env_values = true, value_name = "USER:PASSWORD")]
    pub read_only_auth: Option<String>,

    /// Listen beyond loopback without --auth all the same: anyone who can reach the address
    /// can retry, delete and cancel jobs and pause queues. Without it, such a --listen is
    /// refused.
    #[arg(long)]
    pub insecure_without_auth: bool,
}

/// The dashboard's routes: the page, its assets and the JSON API, behind `guard`
/// ([`guard::Guard`]: basic auth, full or read-only, and the `Host` check).
pub fn router(admin: Admin, guard: guard::Guard) -> Router {
    api::routes(admin).layer(axum::middleware::from_fn_with_state(
        Arc::new(guard),
        guard::check,
    ))
}

/// Serves the dashboard until SIGINT or SIGTERM. Prints the address it listens on.
pub async fn serve(admin: Admin, args: DashboardArgs) -> Result<(), DashboardError> {
    let loopback = args.listen.ip().is_loopback();
    let authenticated = args.auth.is_some() || args.read_only_auth.is_some();
    if !loopback && !authenticated && !args.insecure_without_auth {
        return Err(DashboardError::Unauthenticated { addr: args.listen });
    }
    let mut guard = guard::Guard::new(args.auth.as_deref(), loopback)?;
    if let Some(credentials) = &args.read_only_auth {
        guard = guard.read_only(credentials)?;
    }
    let app = router(admin, guard);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| DashboardError::Listen {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(DashboardError::Serve)?;
    if !loopback && !authenticated {
        eprintln!(
            "jobsctl: warning: the dashboard listens on {addr} without --auth \
             (--insecure-without-auth): anyone who can reach it can retry, delete and cancel \
             jobs and pause queues"
        );
    }
    println!("Dashboard on http://{addr}/");
    axum::serve(listener, app)
        .with_graceful_shutdown(stop_signal())
        .await
        .map_err(DashboardError::Serve)
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        }
        _ => std::future::pending().await,
    }
}
