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
//! `docs/architecture.md`). With the `ops` feature, on by default, the module
#![cfg_attr(feature = "ops", doc = "[`ops`](crate::ops)")]
// Built without the feature (as the README has applications do), the module is not there to
// link to: the name points at the published docs, built with every feature.
#![cfg_attr(
    not(feature = "ops"),
    doc = "[`ops`](https://docs.rs/redjob-worker/latest/redjob_worker/ops/index.html)"
)]
//! holds the operators' tools: the `jobsctl` command and its web dashboard. An application
//! that links the worker and wants none of that depends on `redjob-worker` with
//! `default-features = false`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod exit;
pub mod listeners;
pub mod logging;
#[cfg(feature = "ops")]
#[cfg_attr(docsrs, doc(cfg(feature = "ops")))]
pub mod ops;
mod options;
#[cfg(feature = "otel")]
mod otlp;
mod plugin;
mod prometheus;
mod runtime;
mod stats;
pub mod testing;

pub use config::{OnBlocked, WorkerConfig};
pub use exit::Exit;
pub use options::WorkerOptions;
pub use plugin::Plugin;
pub use prometheus::MetricsError;
pub use runtime::watchdog::EXIT_CODE as WATCHDOG_EXIT_CODE;
pub use runtime::worker::{Worker, WorkerError, CONFIG_EXIT_CODE};
pub use stats::Stats;

/// The command-line parser the worker's options are built with, for a program's own flags
/// beside them ([`Command::from_args_with`], or [`WorkerOptions`] flattened into a parser of
/// the program's): derived through this path, they are parsed by the very version the
/// worker's options are, with no dependency of the program's own to keep in step. Bring it in
/// with `use redjob_worker::clap;`, as clap's derives name the crate `clap`.
pub use clap;

use clap::{CommandFactory, FromArgMatches, Parser};
use redjob::middleware::Layer;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Parses the command line, runs a worker until it stops, and returns its exit status: the
/// whole of a worker binary whose jobs need no state built at run time. One that does uses
/// [`Command`].
pub fn main() -> ExitCode {
    let command = Command::from_args();
    let runtime = match async_runtime(command.options.threads) {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("worker: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(command.run())
}

/// The async runtime [`main`] runs a worker on, with `threads` threads (`--threads`):
/// tokio's multi-threaded runtime, one thread per CPU by default (or `$TOKIO_WORKER_THREADS`);
/// with one, a current-thread runtime, where the worker's own steps and its jobs take turns on
/// the thread that calls `block_on`.
///
/// Handing work between threads costs more than the work of a job that only awaits I/O: on
/// two cores shared with Redis, one thread drains a backlog of such jobs with about a fifth
/// less CPU per job than two (docs/benchmarks.md). A handler that computes or blocks holds up
/// every other job on one thread, so CPU-bound work wants more threads, or
/// `tokio::task::spawn_blocking`. The watchdog and the cancel listener have threads of their
/// own either way.
///
/// On one thread, a task woken from another thread (a job whose I/O completes on a client's
/// own thread, in `spawn_blocking` or on another runtime; a cancellation) waits in the
/// runtime's global queue, which tokio by default reads once per 31 tasks run, behind the
/// worker's own steps woken on the thread itself. This runtime reads it before each task, so
/// that such a job resumes as soon as its I/O completes (the `io` scenario of
/// docs/benchmarks.md).
///
/// ```no_run
/// let runtime = redjob_worker::async_runtime(std::num::NonZeroUsize::new(1)).unwrap();
/// let code = runtime.block_on(redjob_worker::Command::from_args().run());
/// # let _ = code;
/// ```
pub fn async_runtime(
    threads: Option<std::num::NonZeroUsize>,
) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads.map(std::num::NonZeroUsize::get) {
        Some(1) => {
            let mut builder = tokio::runtime::Builder::new_current_thread();
            builder.global_queue_interval(1);
            builder
        }
        Some(n) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build()
}

/// A worker program: the command line of [`main`], parsed, with the state, middleware and
/// listeners the program adds, and its own default queues ([`Command::default_queues`]). For
/// a binary whose state is built asynchronously (a database pool needs a runtime), in its own
/// `#[tokio::main]`, without a dependency on clap:
///
/// ```no_run
/// # struct PgPool;
/// # impl PgPool { async fn connect(_: &str) -> Result<PgPool, std::io::Error> { Ok(PgPool) } }
/// #[tokio::main]
/// async fn main() -> std::process::ExitCode {
///     let command = redjob_worker::Command::from_args(); // --help and bad options exit here
///     let pool = match PgPool::connect("postgres://localhost/shop").await {
///         Ok(pool) => pool,
///         Err(err) => {
///             eprintln!("worker: cannot connect to PostgreSQL: {err}");
///             return std::process::ExitCode::from(redjob_worker::CONFIG_EXIT_CODE);
///         }
///     };
///     command.state(pool).run().await
/// }
/// ```
///
/// A binary with flags of its own beside the worker's parses them with
/// [`Command::from_args_with`].
#[must_use = "a command does nothing until it is run"]
pub struct Command {
    options: WorkerOptions,
    setup: Vec<Box<dyn FnOnce(Worker) -> Worker + Send>>,
}

impl Command {
    /// The process's command line, parsed as the worker binary's (`docs/worker.md`). Prints
    /// the help, the version, or what is wrong with the options, and exits, as the binary
    /// does.
    pub fn from_args() -> Command {
        Command::new(WorkerOptions::parse())
    }

    /// The process's command line parsed as [`Command::from_args`] does, with the program's
    /// own flags `A` beside the worker's: `--help` lists both, and a bad flag of either kind
    /// exits as the binary does. `A` derives [`clap::Args`] through [`clap`] as this crate
    /// re-exports it, so that one version of clap parses both, and the program needs no
    /// dependency on clap. Its flags must not share a name with the worker's (clap panics at
    /// the parse when they do); a doc comment on `A` is the program's description in `--help`.
    ///
    /// ```no_run
    /// use redjob_worker::clap;
    ///
    /// /// Runs the shop's jobs.
    /// #[derive(clap::Args)]
    /// struct Flags {
    ///     /// The carrier's API, which the shipping jobs call.
    ///     #[arg(long, env = "CARRIER_URL")]
    ///     carrier_url: String,
    /// }
    ///
    /// /// The state the shipping jobs read.
    /// struct Carrier {
    ///     url: String,
    /// }
    ///
    /// #[tokio::main]
    /// async fn main() -> std::process::ExitCode {
    ///     // --help, a bad option and a missing --carrier-url exit here.
    ///     let (command, flags) = redjob_worker::Command::from_args_with::<Flags>();
    ///     let carrier = Carrier { url: flags.carrier_url };
    ///     command.state(carrier).run().await
    /// }
    /// ```
    pub fn from_args_with<A: clap::Args>() -> (Command, A) {
        parse_with(std::env::args_os()).unwrap_or_else(|err| err.exit())
    }

    /// A worker program run with `options`: the worker's options parsed by a parser of the
    /// program's own (one with subcommands, say), into which [`WorkerOptions`] flattens.
    ///
    /// ```no_run
    /// use redjob_worker::clap::{self, Parser};
    ///
    /// /// The shop's command line.
    /// #[derive(Parser)]
    /// #[command(version)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     worker: redjob_worker::WorkerOptions,
    ///     /// Check the settings and exit.
    ///     #[arg(long)]
    ///     check: bool,
    /// }
    ///
    /// #[tokio::main]
    /// async fn main() -> std::process::ExitCode {
    ///     let cli = Cli::parse();
    ///     if cli.check {
    ///         return std::process::ExitCode::SUCCESS;
    ///     }
    ///     redjob_worker::Command::new(cli.worker).run().await
    /// }
    /// ```
    pub fn new(options: WorkerOptions) -> Command {
        Command {
            options,
            setup: Vec::new(),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &WorkerOptions {
        &self.options
    }

    /// Takes jobs from `queues` unless the command line names its own with `--queue`
    /// ([`WorkerOptions::default_queues`]): the default of a binary whose jobs declare queues
    /// of their own (`#[job(queue = ...)]`), in place of `default`.
    ///
    /// ```no_run
    /// #[tokio::main]
    /// async fn main() -> std::process::ExitCode {
    ///     redjob_worker::Command::from_args()
    ///         .default_queues(["payments", "default"])
    ///         .run()
    ///         .await
    /// }
    /// ```
    pub fn default_queues<Q: Into<String>>(
        mut self,
        queues: impl IntoIterator<Item = Q>,
    ) -> Command {
        self.options = self.options.default_queues(queues);
        self
    }

    /// Gives the worker `value` as application state ([`Worker::state`]).
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Command {
        self.setup.push(Box::new(move |worker| worker.state(value)));
        self
    }

    /// Runs `middleware` around every job ([`Worker::middleware`]).
    pub fn middleware(mut self, middleware: impl Into<Layer>) -> Command {
        let layer = middleware.into();
        self.setup
            .push(Box::new(move |worker| worker.middleware(layer)));
        self
    }

    /// Reports what the worker does to `listener` ([`Worker::listen`]).
    pub fn listen(mut self, listener: impl listeners::Listener) -> Command {
        self.setup
            .push(Box::new(move |worker| worker.listen(listener)));
        self
    }

    /// Runs `plugin` beside the jobs ([`Worker::plugin`]).
    pub fn plugin(mut self, plugin: impl Plugin) -> Command {
        self.setup
            .push(Box::new(move |worker| worker.plugin(plugin)));
        self
    }

    /// Runs an outbox relay from `pool`'s database into the worker's Redis beside the jobs
    /// ([`Worker::relay`], feature `postgres`), with the default outbox and settings.
    #[cfg(feature = "postgres")]
    pub fn relay_outbox(mut self, pool: sqlx::PgPool) -> Command {
        self.setup.push(Box::new(move |worker| {
            let relay = redjob::outbox::Relay::new(pool, worker.queue().clone());
            worker.relay(relay)
        }));
        self
    }

    /// Sets up logging (`--json`), runs the worker until it stops, stopping gracefully on
    /// the first SIGTERM, SIGINT or SIGQUIT and at once on the second ([`stop_on_signals`]),
    /// and returns the process exit status: the stop's ([`Exit::code`]), or, when the worker
    /// cannot start, [`WorkerError::exit_code`] with the reason on standard error.
    pub async fn run(self) -> ExitCode {
        logging::init(self.options.json);
        let code = match self.run_worker().await {
            Ok(exit) => ExitCode::from(exit.code()),
            Err(err) => {
                eprintln!("worker: {err}");
                ExitCode::from(err.exit_code())
            }
        };
        // The exporter's client blocks: flushed off the runtime's threads.
        #[cfg(feature = "otel")]
        let _ = tokio::task::spawn_blocking(logging::flush).await;
        code
    }

    /// Runs the worker until it stops, stopping on signals as [`Command::run`] does, and says
    /// why it stopped. A handler that blocks its thread past its timeout ends the process
    /// ([`OnBlocked::ExitProcess`]), as the binary's does. With `--schedule-only` no job runs,
    /// so the state, middleware and listeners added are not used.
    pub async fn run_worker(self) -> Result<Exit, WorkerError> {
        let options = self.options;
        if let Some(threads) = options.threads {
            let running = tokio::runtime::Handle::current().metrics().num_workers();
            if running != threads.get() {
                tracing::warn!(
                    threads,
                    running,
                    "--threads sizes the runtime redjob_worker::main builds; this program built its own"
                );
            }
        }
        let config = redjob::QueueConfig {
            prefix: options.prefix.clone(),
            ..Default::default()
        };
        let queue = redjob::RedisQueue::with_config(&options.redis, config)?;
        if options.schedule_only {
            return keep_schedules_only(queue, options.metrics_addr, &options.waits).await;
        }
        let config = WorkerConfig {
            // A worker process of its own, whose supervisor starts a fresh one.
            on_blocked: OnBlocked::ExitProcess,
            ..options.config()
        };
        let mut worker = Worker::new(config, queue)?;
        for setup in self.setup {
            worker = setup(worker);
        }
        if let Some(addr) = options.metrics_addr {
            prometheus::install(addr, options.concurrency)?;
        }
        tokio::spawn(stop_on_signals(worker.stop_token()));
        worker.run().await
    }
}

/// The worker's options and a program's own flags `A`, parsed from one command line `args`
/// (the program's name first).
fn parse_with<A: clap::Args>(
    args: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
) -> Result<(Command, A), clap::Error> {
    let mut parser = A::augment_args(WorkerOptions::command());
    let mut matches = parser.try_get_matches_from_mut(args)?;
    let options =
        WorkerOptions::from_arg_matches_mut(&mut matches).map_err(|err| err.format(&mut parser))?;
    let own = A::from_arg_matches_mut(&mut matches).map_err(|err| err.format(&mut parser))?;
    Ok((Command::new(options), own))
}

/// Runs a worker with `options` until it stops, stopping gracefully on SIGTERM, SIGINT or
/// SIGQUIT. A second signal exits the process at once (status 130); its running jobs come
/// back after retry_after.
///
/// Redis is `options.redis` with [`QueueConfig::default`](redjob::QueueConfig) but for the
/// key prefix (`--prefix`): the signing key and TLS CA file come from `JOBS_SIGNING_KEY` and
/// `REDIS_TLS_CA_FILE`. With
/// `--metrics-addr`, the process serves Prometheus metrics there. [`Command`] does the same
/// with state, middleware and listeners.
pub async fn run(options: WorkerOptions) -> Result<Exit, WorkerError> {
    Command::new(options).run_worker().await
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

/// The worker binary's signal handling, for a program that runs workers itself: cancels
/// `stop` on the first SIGTERM, SIGINT or SIGQUIT (a graceful stop of every worker and server
/// that watches it), and on a second one exits the process at once with status 130. Spawn it
/// once; it installs the handlers when first polled.
///
/// ```no_run
/// # async fn demo() {
/// let stop = tokio_util::sync::CancellationToken::new();
/// tokio::spawn(redjob_worker::stop_on_signals(stop.clone()));
/// // Workers: worker.run_until(stop.clone().cancelled_owned()); an axum server:
/// // axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned())
/// # }
/// ```
pub async fn stop_on_signals(stop: CancellationToken) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A program's own flags, as `Command::from_args_with`'s example has them.
    #[derive(Debug, clap::Args)]
    struct Flags {
        #[arg(long)]
        carrier_url: String,
        #[arg(long)]
        dry_run: bool,
    }

    #[test]
    fn a_programs_own_flags_are_parsed_beside_the_workers() {
        let (command, flags) = parse_with::<Flags>([
            "orders-worker",
            "--queue",
            "high",
            "--carrier-url",
            "http://carrier",
            "--concurrency",
            "3",
        ])
        .unwrap();
        assert_eq!(flags.carrier_url, "http://carrier");
        assert!(!flags.dry_run);
        let config = command.options().config();
        assert_eq!(
            (config.queues, config.concurrency),
            (vec!["high".to_owned()], 3)
        );
    }

    /// What the parse of `args` stops at; panics when it does not stop.
    fn stopped(args: &[&str]) -> clap::Error {
        match parse_with::<Flags>(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(err) => err,
        }
    }

    #[test]
    fn one_help_lists_both_and_a_bad_flag_of_either_kind_is_refused() {
        let help = stopped(&["orders-worker", "--help"]);
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        let help = help.to_string();
        assert!(
            help.contains("--carrier-url") && help.contains("--retry-after"),
            "{help}"
        );

        let missing = stopped(&["orders-worker"]);
        assert_eq!(
            missing.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        let bad = stopped(&[
            "orders-worker",
            "--carrier-url",
            "x",
            "--concurrency",
            "many",
        ]);
        assert_eq!(bad.kind(), clap::error::ErrorKind::ValueValidation);
    }

    #[test]
    fn a_programs_default_queues_give_way_to_the_command_lines() {
        let defaulted = Command::new(WorkerOptions::parse_from(["worker"]))
            .default_queues(["payments", "default"]);
        assert_eq!(defaulted.options().config().queues, ["payments", "default"]);

        let given = Command::new(WorkerOptions::parse_from(["worker", "--queue", "high"]))
            .default_queues(["payments"]);
        assert_eq!(given.options().config().queues, ["high"]);

        let plain = Command::new(WorkerOptions::parse_from(["worker"]));
        assert_eq!(plain.options().config().queues, [redjob::DEFAULT_QUEUE]);
    }
}
