//! The operators' tools: the `jobsctl` command and its web dashboard, built on
//! `redjob::admin`. Compiled with the `ops` feature (on by default).
//!
//! `jobsctl` works on raw payloads, so it serves any application without its job types. Every
//! command prints a table for people, or one JSON document with `--json`, and exits non-zero
//! with a message on stderr when anything goes wrong; `docs/operations.md` is the operator's
//! guide. Each family of commands has its file: `args` the command line, `failed` the
//! failed-job store, `queues` the queues, `waits` the wait thresholds, `unrunnable` the job
//! types waiting for a worker that links them, `workers` the workers,
//! `batches` the batches, `unique` the unique locks, `outbox` the outbox relays, `status` a job's
//! status, its cancellation and a queue's events, `render` the tables and
//! times, `time` the times operators give, [`dashboard`] the web page. The binary is one line:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     redjob_worker::ops::main()
//! }
//! ```

mod args;
mod batches;
pub mod dashboard;
mod error;
mod failed;
mod groups;
mod outbox;
mod queues;
mod render;
mod schedules;
mod status;
mod time;
mod unique;
mod unrunnable;
mod waits;
mod workers;

use clap::Parser;
use redjob::admin::{Admin, AdminError, BatchFilter, RecentFilter, UniqueFilter, PAGE_BUDGET};
use redjob::{QueueConfig, RedisQueue};
use std::process::ExitCode;
use std::time::Duration;

use args::{Cli, Command, UniqueForget};
use error::CliError;

/// How long a page of `jobsctl failed`, `batches` or `unique` may search: a person at a
/// terminal would rather wait a second for a whole search than follow cursors through empty
/// pages.
const TERMINAL_PAGE_BUDGET: Duration = Duration::from_secs(1);

/// Parses the command line, runs the command and returns its exit status: 0 on success, 1
/// on any error (printed to stderr as `jobsctl: ...`) and when `jobsctl monitor` finds a queue over
/// its maximum or its wait threshold, 2 when the command line does not parse.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("jobsctl: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("jobsctl: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command; returns the exit status it asks for (0, or 1 for `monitor` over its
/// maximum or a wait threshold).
async fn run(cli: Cli) -> Result<u8, CliError> {
    let config = QueueConfig {
        prefix: cli.prefix,
        ..QueueConfig::default()
    };
    let queue = RedisQueue::with_config(&cli.redis, config).map_err(AdminError::from)?;
    let admin = Admin::new(queue).with_page_budget(TERMINAL_PAGE_BUDGET);
    let json = cli.json;
    match cli.command {
        Command::Dashboard(args) => {
            // Its pages refresh every few seconds: each answers within the default budget.
            dashboard::serve(admin.with_page_budget(PAGE_BUDGET), args).await?;
            Ok(0)
        }
        Command::Failed(args) => failed::list(&admin, json, args).await,
        Command::Retry(args) => failed::retry(&admin, json, args).await,
        Command::Forget(args) => failed::forget(&admin, json, args).await,
        Command::Flush { hours } => failed::flush(&admin, json, hours).await,
        Command::PruneFailed { hours } => failed::prune(&admin, json, hours).await,
        Command::Size { queues } => queues::size(&admin, json, queues).await,
        Command::Clear { queue, force } => queues::clear(&admin, json, queue, force).await,
        Command::Monitor { queues, max } => queues::monitor(&admin, json, queues, max).await,
        Command::Inspect {
            queue,
            section,
            limit,
        } => queues::inspect(&admin, json, queue, section, limit).await,
        Command::Pause { queue } => queues::pause(&admin, json, queue).await,
        Command::Resume { queue } => queues::resume(&admin, json, queue).await,
        Command::Paused => queues::paused(&admin, json).await,
        Command::Outbox(args) => outbox::run(&admin, json, args).await,
        Command::Recent {
            queue,
            limit,
            tag,
            job,
            outcome,
            after,
        } => {
            let filter = RecentFilter { tag, job, outcome };
            workers::recent(&admin, json, &queue, &filter, after, limit).await
        }
        Command::Restart => workers::restart(&admin, json).await,
        Command::Workers => workers::workers(&admin, json).await,
        Command::Batches {
            command,
            limit,
            name,
            state,
            after,
        } => {
            let filter = BatchFilter { name, state };
            batches::run(&admin, json, command, &filter, after, limit).await
        }
        Command::Schedule { command } => schedules::run(&admin, json, command).await,
        Command::Status { uuid } => status::status(&admin, json, uuid).await,
        Command::Cancel { uuid } => status::cancel(&admin, json, uuid).await,
        Command::Events {
            queue,
            on,
            off,
            max,
            count,
            after,
        } => {
            let switch = match (on, off) {
                (true, _) => Some(Some(max)),
                (_, true) => Some(None),
                _ => None,
            };
            status::events(&admin, json, &queue, switch, count, after).await
        }
        Command::Groups {
            queue,
            limit,
            pause,
            resume,
            set,
            concurrency,
            rate,
            weight,
        } => {
            let change = match (pause, resume, set, weight) {
                (Some(group), _, _, _) => Some(groups::Change::Pause(group)),
                (_, Some(group), _, _) => Some(groups::Change::Resume(group)),
                (_, _, Some(group), _) => Some(groups::Change::Limits(
                    group,
                    redjob::queue::GroupLimits { concurrency, rate },
                )),
                (_, _, _, Some(weight)) => Some(groups::Change::weight(&weight)?),
                _ => None,
            };
            groups::run(&admin, json, &queue, limit, change).await
        }
        Command::Waits { command } => waits::run(&admin, json, command).await,
        Command::Unrunnable => unrunnable::run(&admin, json).await,
        Command::Unique {
            forget: None,
            job,
            limit,
            after,
        } => unique::list(&admin, json, &UniqueFilter { job }, after, limit).await,
        Command::Unique {
            forget: Some(UniqueForget::Forget { keys }),
            ..
        } => unique::forget(&admin, json, keys).await,
    }
}
