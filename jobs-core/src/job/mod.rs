//! The `Job` trait and the options a job type carries.

pub mod attempt;
pub mod checkpoint;
pub mod context;
pub mod failed;
pub mod identity;
pub mod middleware;
pub mod registry;
mod result;
pub mod state;

pub use result::{JobError, JobResult};

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::job::context::JobContext;
use crate::job::failed::FailedContext;
use crate::job::middleware::Layer;
use crate::payload::backoff::Backoff;
use crate::payload::unique::UniqueUntil;
use crate::trace::TraceMode;

/// A unit of background work: a plain serializable struct with an async handler.
///
/// `#[job]` also gives the type a `dispatch()` method, which starts a
/// [`PendingDispatch`](crate::PendingDispatch); generic code over `J: Job` writes
/// `PendingDispatch::new(job)`.
///
/// Implement it inside `#[job]`, which names the job, records its options, and registers the
/// type so that every worker linked with it can run it:
///
/// ```
/// use redjob::{job, Job, JobContext, JobResult};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendInvoice {
///     id: u64,
/// }
///
/// #[job(queue = "billing", tries = 3, backoff = [1, 5, 10], timeout = 30)]
/// impl Job for SendInvoice {
///     async fn handle(&self, ctx: &JobContext) -> JobResult {
///         println!("invoice {} on attempt {}", self.id, ctx.attempt());
///         Ok(())
///     }
/// }
///
/// assert_eq!(SendInvoice::NAME, "SendInvoice");
/// assert_eq!(SendInvoice::options().queue, Some("billing"));
/// ```
#[async_trait]
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The name stored in the payload's `job` field, by which workers find the type.
    /// `#[job]` sets it to the type's name, or to `name = "..."`.
    const NAME: &'static str;

    /// The application state its handler reads with [`JobContext::state`], as written in
    /// `#[job(state = ...)]`: a worker without one of them refuses to start. Default: none.
    const STATE: &'static [state::StateType] = &[];

    /// What the handler returns when the job is done: `()` unless the `impl` block says
    /// `type Output = ...;` (`#[job]` adds `type Output = ();` otherwise). A tracked job's
    /// output is kept, serialized, for its dispatcher to read
    /// ([`Tracked::wait`](crate::status::Tracked::wait), [`RedisQueue::wait`]); see
    /// [`crate::status`].
    ///
    /// [`RedisQueue::wait`]: crate::RedisQueue::wait
    type Output: Serialize + Send + 'static;

    /// The options given in `#[job(...)]`; dispatch-time settings override them.
    fn options() -> JobOptions {
        JobOptions::default()
    }

    /// Runs the job. An `Err` (or a panic, or a timeout) is a failed attempt: the job is
    /// retried after its backoff until its tries are used up, then recorded as failed.
    async fn handle(&self, ctx: &JobContext) -> JobResult<Self::Output>;

    /// Called when the job has failed for good, for whatever reason (its last attempt's error,
    /// a panic, a timeout, too many attempts, a middleware's verdict), after its failed-job
    /// record is written (default: nothing). What it returns or panics with is logged and
    /// changes nothing; it is bounded by the worker's `--timeout`. The call is owed in Redis in
    /// the step that writes the record, so a worker that dies before making it (or before
    /// reporting it made) leaves it to another: it is never skipped, and runs again only after
    /// such a death.
    async fn failed(&self, _ctx: &FailedContext) {}

    /// What makes two jobs of this type duplicates when it is unique (`#[job(unique_for =
    /// ...)]`): jobs with equal ids are. Default: empty, so any two are.
    fn unique_id(&self) -> String {
        String::new()
    }

    /// Tags operators can find this job by (`jobsctl failed --tag`, the dashboard), kept in its
    /// payload (default: none). Tags are not encrypted: they must carry no secrets.
    fn tags(&self) -> Vec<String> {
        Vec::new()
    }

    /// The group of its queue this job waits in, served in turn with the queue's other groups
    /// within each group's limits ([fair groups](crate::groups)): a tenant, say. A dispatch's
    /// [`group`](crate::PendingDispatch::group) wins. Default: none, the queue's own list.
    fn group(&self) -> Option<String> {
        None
    }

    /// What makes dispatches of this type one debounced job (`#[job(debounce = ...)]`):
    /// those with equal ids. Default: empty, so all of them.
    fn debounce_id(&self) -> String {
        String::new()
    }

    /// The middleware every run of this job goes through, outermost first (default: none).
    /// See [`crate::middleware`].
    fn middleware(&self) -> Vec<Layer> {
        Vec::new()
    }
}

/// The options of a job type, as written in `#[job(...)]`. `None` defers to the worker.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobOptions {
    /// Queue to push to (default: `"default"`).
    pub queue: Option<&'static str>,
    /// Attempts allowed (0: unlimited); beats the worker's `--tries`.
    pub tries: Option<u32>,
    /// Seconds between retries; beats the worker's `--backoff`.
    pub backoff: Option<&'static [u64]>,
    /// Seconds the handler may run; beats the worker's `--timeout`.
    pub timeout: Option<u64>,
    /// Fail at once on a timeout instead of retrying.
    pub fail_on_timeout: bool,
    /// Name shown in logs and tools (default: the job's name).
    pub display_name: Option<&'static str>,
    /// The PHP class a Laravel app queues for this job (`App\\Jobs\\SendInvoice`): its
    /// `CallQueuedHandler` payloads run this job, filled from the object's properties.
    pub laravel: Option<&'static str>,
    /// Seconds after its dispatch during which the job is retried, tries not counted
    /// (Laravel's `retryUntil`, written into the payload's `retryUntil`).
    pub retry_for: Option<u64>,
    /// Failed attempts (errors, panics, timeouts; not releases) after which the job fails,
    /// whatever tries it has left.
    pub max_exceptions: Option<u32>,
    /// Seconds a debounced job waits after its last dispatch: dispatches with one
    /// [`Job::debounce_id`] within that time leave one job, with the latest data.
    pub debounce: Option<u64>,
    /// Seconds a debounced job waits at most after the first dispatch of its window.
    pub max_wait: Option<u64>,
    /// Seconds a unique job's lock lasts at most: set, the job is unique (see
    /// [`crate::payload::unique`]).
    pub unique_for: Option<u64>,
    /// Until when a unique job keeps its lock.
    pub unique_until: UniqueUntil,
    /// How its attempts' spans relate to the trace it was dispatched in (default: the
    /// worker's `--trace`, else as [`trace::mode_for`](crate::trace::mode_for) says).
    pub trace: Option<TraceMode>,
    /// Seconds a tracked job's outcome (its state, result or error) is kept after it
    /// settles: set, every dispatch of the type is tracked (`#[job(track)]`, with
    /// `result_ttl = N`; see [`crate::status`]).
    pub track: Option<u64>,
    /// Its attempts keep the checkpoints they save (`#[job(resumable)]`,
    /// [`JobContext::checkpoint`]): an attempt starts from the last one, after an
    /// interruption, a release or a crash, until the job is done or failed (see
    /// [`crate::checkpoint`]).
    pub resumable: bool,
    /// The job type has a [`Job::failed`] hook (`#[job]` sees whether the `impl` block
    /// defines one): its call is owed in the step that records the failure.
    pub failed_hook: bool,
}

impl JobOptions {
    /// The backoff list, when set.
    pub fn backoff(&self) -> Option<Backoff> {
        self.backoff.map(Backoff::from)
    }
}
