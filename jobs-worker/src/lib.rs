//! The worker runtime for `jobs-core`: Laravel's `queue:work` on Redis, with concurrency,
//! punctual delayed jobs and graceful shutdown.
//!
//! An application's worker binary is one line; every job type linked into it can run:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     jobs_worker::main()
//! }
//! ```
//!
//! `cargo run --bin worker -- --queue high,default --tries 3 --delay 1` then takes jobs from
//! `queues:high` before `queues:default`. The options are in [`WorkerOptions`] and
//! `docs/worker.md`. A job's path: [`fetcher`] reserves it, [`processor`] runs and settles it
//! ([`acker`] deletes finished jobs' reservations in batches, [`heartbeat`] keeps running
//! jobs' reservations alive), [`worker`] keeps the slots busy and decides when to stop, and
//! [`watchdog`] ends the process when a handler blocks its thread past its timeout,
//! and [`control`] publishes the worker's state for operators and obeys their pause and
//! restart requests. [`prometheus`] serves the worker's metrics (`--metrics-addr`). [`cli`]
//! is the `jobsctl` command for operators, [`dashboard`] its web dashboard.

pub mod acker;
pub mod cli;
pub mod control;
pub mod dashboard;
pub mod fetcher;
pub mod heartbeat;
pub mod logging;
pub mod options;
pub mod processor;
pub mod prometheus;
pub mod retry;
pub mod rules;
pub mod stats;
pub mod waker;
pub mod watchdog;
pub mod worker;

pub use options::WorkerOptions;
pub use worker::{Exit, Worker, WorkerError};

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
pub async fn run(options: WorkerOptions) -> Result<Exit, WorkerError> {
    let worker = Worker::new(options)?;
    tokio::spawn(stop_on_signals(worker.stop_token()));
    Ok(worker.run().await)
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
