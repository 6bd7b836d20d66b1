//! The worker runtime for `redjob`: Laravel's `queue:work` on Redis, with concurrency,
//! punctual delayed jobs and graceful shutdown.
//!
//! An application's worker binary is one line; every job type linked into it can run:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     redjob_worker::main()
//! }
//! ```
//!
//! `cargo run --bin worker -- --queue high,default --tries 3 --delay 1` then takes jobs from
//! `queues:high` before `queues:default`. The options are in [`WorkerOptions`] and
//! `docs/worker.md`; a program that runs a worker itself builds a [`Worker`] from them.
//!
//! The runtime's parts are private, one file per step of a job's path (`src/runtime/`: see
//! `docs/architecture.md`). With the `ops` feature, on by default, [`ops`] holds the
//! operators' tools: the `jobsctl` command and its web dashboard. An application that links
//! the worker and wants none of that depends on `redjob-worker` with
//! `default-features = false`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
pub mod events;
pub mod logging;
#[cfg(feature = "ops")]
#[cfg_attr(docsrs, doc(cfg(feature = "ops")))]
pub mod ops;
mod options;
mod prometheus;
mod runtime;
mod stats;
pub mod testing;

pub use config::WorkerConfig;
pub use options::WorkerOptions;
pub use prometheus::MetricsError;
pub use runtime::exit::Exit;
pub use runtime::watchdog::EXIT_CODE as WATCHDOG_EXIT_CODE;
pub use runtime::worker::{Worker, WorkerError};
pub use stats::Stats;

use clap::Parser;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Parses the command line, runs a worker until it stops, and returns its exit status.
pub fn main() -> ExitCode {
    let options = WorkerOptions::parse();
    logging::init(options.json);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("worker: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match run(options).await {
            Ok(exit) => ExitCode::from(exit.code()),
            Err(err) => {
                eprintln!("worker: {err}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Runs a worker with `options` until it stops, stopping gracefully on SIGTERM, SIGINT or
/// SIGQUIT. A second signal exits the process at once (status 130); its running jobs come
/// back after retry_after.
///
/// Redis is `options.redis` with [`QueueConfig::default`](redjob::QueueConfig) but for the
/// key prefix (`--prefix`): the signing key and TLS CA file come from `JOBS_SIGNING_KEY` and
/// `REDIS_TLS_CA_FILE`. With
/// `--metrics-addr`, the process serves Prometheus metrics there.
pub async fn run(options: WorkerOptions) -> Result<Exit, WorkerError> {
    let config = redjob::QueueConfig {
        prefix: options.prefix.clone(),
        ..Default::default()
    };
    let queue = redjob::RedisQueue::with_config(&options.redis, config)?;
    if options.schedule_only {
        return keep_schedules_only(queue, options.metrics_addr, &options.waits).await;
    }
    let worker = Worker::new(options.config(), queue)?;
    if let Some(addr) = options.metrics_addr {
        prometheus::install(addr, options.concurrency)?;
    }
    tokio::spawn(stop_on_signals(worker.stop_token()));
    Ok(worker.run().await)
}

/// `--schedule-only`: keeps the schedules this program defines, taking no jobs, until a
/// signal stops it. Its `--wait` thresholds are written as a worker's are.
async fn keep_schedules_only(
    queue: redjob::RedisQueue,
    metrics_addr: Option<std::net::SocketAddr>,
    waits: &[redjob::admin::WaitThreshold],
) -> Result<Exit, WorkerError> {
    if let Some(addr) = metrics_addr {
        prometheus::install(addr, 0)?;
    }
    let schedules = redjob::schedule::defined();
    tracing::info!(
        schedules = %schedules.iter().map(|s| s.name()).collect::<Vec<_>>().join(","),
        "keeping the schedules, taking no jobs"
    );
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signals(stop.clone()));
    let _waits = runtime::waits::write(&queue, waits, &stop).await;
    if let Some(scheduler) = runtime::scheduler::start(queue, schedules, stop.clone()) {
        let _ = scheduler.await;
    } else {
        stop.cancelled().await;
    }
    Ok(Exit::Stopped)
}

async fn stop_on_signals(stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::quit()),
    ) else {
        tracing::error!("cannot listen for SIGTERM/SIGINT/SIGQUIT");
        return;
    };
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {}, _ = quit.recv() => {} }
    tracing::info!("stop signal received; finishing running jobs (signal again to exit at once)");
    stop.cancel();
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {}, _ = quit.recv() => {} }
    tracing::warn!("second stop signal; exiting at once");
    std::process::exit(130);
}
