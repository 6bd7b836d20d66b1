//! `jobsctl dashboard`: a live web page over the same [`Admin`] library as the `jobsctl` command.
//!
//! The page (`assets/`, embedded in the binary) polls the JSON endpoints of [`router`] every
//! 2 seconds: throughput over the last hour, queues with pause and resume, failed jobs with
//! search, detail, retry and forget, live workers, and each queue's recent jobs.
//!
//! Safe by default: it listens on loopback unless told otherwise, `--auth user:password` puts
//! every request behind HTTP basic auth, and every change is a POST that a page of another
//! site cannot make ([`guard`]). `docs/operations.md` describes it.

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

    /// Listen beyond loopback without --auth all the same: anyone who can reach the address
    /// can retry, delete and cancel jobs and pause queues. Without it, such a --listen is
    /// refused.
    #[arg(long)]
    pub insecure_without_auth: bool,
}

/// The dashboard's routes: the page, its assets and the JSON API, behind the [`guard`].
/// `credentials` (`user:password`) requires basic auth; `loopback` refuses requests whose
/// `Host` is not a loopback name (against DNS rebinding).
pub fn router(
    admin: Admin,
    credentials: Option<&str>,
    loopback: bool,
) -> Result<Router, DashboardError> {
    let guard = guard::Guard::new(credentials, loopback)?;
    Ok(
        api::routes(admin).layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        )),
    )
}

/// Serves the dashboard until SIGINT or SIGTERM. Prints the address it listens on.
pub async fn serve(admin: Admin, args: DashboardArgs) -> Result<(), DashboardError> {
    let loopback = args.listen.ip().is_loopback();
    if !loopback && args.auth.is_none() && !args.insecure_without_auth {
        return Err(DashboardError::Unauthenticated { addr: args.listen });
    }
    let app = router(admin, args.auth.as_deref(), loopback)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| DashboardError::Listen {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(DashboardError::Serve)?;
    if !loopback && args.auth.is_none() {
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
