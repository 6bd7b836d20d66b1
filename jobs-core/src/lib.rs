//! Background jobs for Rust on Redis, following Laravel's Redis queue flow.
//!
//! A job is a plain serializable struct whose `impl Job` block carries `#[job]`:
//!
//! ```no_run
//! use redjob::{job, Job, JobContext, JobResult};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendInvoice {
//!     id: u64,
//! }
//!
//! #[job(queue = "billing", tries = 3, backoff = [1, 5, 10])]
//! impl Job for SendInvoice {
//!     async fn handle(&self, ctx: &JobContext) -> JobResult {
//!         println!("sending invoice {} (attempt {})", self.id, ctx.attempt());
//!         Ok(())
//!     }
//! }
//!
//! # async fn demo() -> Result<(), redjob::Error> {
//! // Pushed to `queues:billing` on the Redis named by REDIS_URL, to run in 30 seconds.
//! let uuid = SendInvoice { id: 7 }.dispatch().delay(30).await?;
//! # Ok(()) }
//! ```
//!
//! Workers (the `redjob-worker` crate) pick jobs up by their registered name. The Redis keys,
//! the payload and the retry rules are Laravel's; see `docs/` in the repository.

pub mod admin;
pub mod checkpoint;
mod dispatch;
mod error;
pub mod groups;
pub mod job;
pub mod middleware;
#[cfg(feature = "postgres")]
pub mod outbox;
pub mod payload;
pub mod queue;
pub mod schedule;
pub mod status;
pub mod testing;
pub mod trace;
pub mod workflow;

pub use dispatch::{Bulk, PendingDispatch, DEFAULT_QUEUE};
pub use error::{Error, Result};
pub use job::context::{JobContext, Request};
pub use job::failed::FailedContext;
pub use job::identity::JobIdentity;
pub use job::registry::JobRegistration;
pub use job::state::{DuplicateState, MissingState, State, StateType};
pub use job::{Job, JobError, JobOptions, JobResult};
pub use payload::backoff::Backoff;
pub use payload::delay::Delay;
pub use payload::failed::FailedJob;
pub use payload::signing::SigningKey;
pub use payload::unique::{Dispatched, Duplicate, UniqueUntil};
pub use payload::Payload;
pub use queue::{Durability, NotDurable, QueueConfig, QueueSize, RedisQueue};
pub use workflow::{Batch, Chain};

/// Marks an `impl Job for T` block as a job: names it, records its options and registers it.
///
/// Options, all optional: `name = "..."` (the payload's `job` field; default: the type's
/// name), `display_name = "..."`, `queue = "..."`, `tries = N`, `backoff = N` or
/// `backoff = [N, ...]` (seconds), `timeout = N` (seconds), `fail_on_timeout`,
/// `retry_for = N` (seconds after the dispatch during which the job is retried, tries not
/// counted), `max_exceptions = N`,
/// `unique_for = N` (seconds: the job is unique by [`Job::unique_id`], see [`payload::unique`]),
/// `unique_until = "done"` (the default) or `"processing"`, `debounce = N` and
/// `max_wait = N` (seconds: dispatches with one [`Job::debounce_id`] within `N` seconds of each
/// other leave one job, which runs `N` seconds after the last, or `max_wait` after the first),
/// `laravel = "App\\Jobs\\SendInvoice"` (the Laravel job class whose queued objects this job
/// runs), `trace = "child" | "link" | "ignore"` (how its attempts continue the trace it was
/// dispatched in: see [`trace::TraceMode`]), `track` with `result_ttl = N` (seconds; default
/// [`status::DEFAULT_RESULT_TTL`]): every dispatch keeps a status record, its progress and its
/// result (see [`status`]), `resumable` (its attempts keep the checkpoints they save and start
/// from the last one: see [`checkpoint`]), and `state = Type`, once per type (application state the handler
/// reads with [`JobContext::state`]; a worker without it refuses to start). The block may say
/// `type Output = T;`, what `handle` returns (`()` otherwise). See [`Job`] for an example.
///
/// `crate = "path"` is the path through which the generated code names this crate, as
/// serde's `#[serde(crate = "...")]` is: `::redjob` unless given. Give it where `redjob` is
/// not a dependency under that name: a program that renamed it in its `Cargo.toml`
/// (`jobs = { package = "redjob", version = "0.1" }`, then `#[job(crate = "jobs")]`), or
/// code that reaches it through another crate's re-export (`#[job(crate = "my_sdk::redjob")]`).
/// Without it such code does not compile: the generated code finds no crate `redjob`.
///
/// ```no_run
/// // Stands for a crate of the application's own that re-exports redjob as `jobs`.
/// mod platform {
///     pub(crate) use ::redjob as jobs;
/// }
///
/// use platform::jobs::{job, Job, JobContext, JobResult};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Ping;
///
/// #[job(crate = "platform::jobs", queue = "health")]
/// impl Job for Ping {
///     async fn handle(&self, _ctx: &JobContext) -> JobResult {
///         Ok(())
///     }
/// }
/// # fn main() {}
/// ```
pub use redjob_macros::job;

/// The attribute that makes a trait impl's `async fn`s object-safe; use it on
/// `impl Middleware for ...` blocks.
pub use async_trait::async_trait;

/// The Redis client this crate talks through, for handlers and middleware that keep data of
/// their own in Redis ([`JobContext::redis`], [`RedisQueue::query`]) without matching its
/// version by hand.
pub use redis;

/// The worker's protocol: what the `redjob-worker` runtime calls and applications never do
/// (reserving, settling, renewing holds, setting up an attempt). Not a public API: its shape
/// follows the worker's needs.
#[doc(hidden)]
pub mod __worker {
    pub use crate::job::attempt::{AttemptEnd, AttemptHooks};
    pub use crate::job::checkpoint::Reservation;
    pub use crate::job::context::AttemptSetup;
    pub use crate::job::state::StateSetup;
    pub use crate::queue::failed::ClaimArgs;
    pub use crate::queue::hold::RenewArgs;
    pub use crate::queue::protocol::WorkerQueue;
    pub use crate::queue::reserve::{DeleteArgs, ExtendArgs, PopArgs, WaitArgs, Woken};
    pub use crate::queue::settle::{
        CompleteArgs, FailArgs, ReleaseArgs, SettleStep, SettleSteps, Settlement,
    };
    pub use crate::workflow::attempt::{take_batch_added, take_chain_edits};
    pub use crate::workflow::count::BatchCompleteArgs;

    /// An attempt's span in the trace its payload carries.
    pub mod trace {
        pub use crate::trace::attempt::{continue_trace, record_error};
    }

    /// What a worker writes for operators: its heartbeat's lifetime and commands, and the
    /// minute a time counts in.
    pub mod telemetry {
        pub use crate::admin::telemetry::{minute_of, WORKER_TTL};
        pub use crate::admin::unrunnable::{met_commands, Met};
        pub use crate::queue::live::{record_commands, removal_commands};
    }
}

/// Items the code generated by `#[job]` refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use inventory;
}
