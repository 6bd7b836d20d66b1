//! [`JobContext`]: the handler's and middleware's view of its attempt.

use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use uuid::Uuid;

use crate::job::checkpoint::{CheckpointStore, Checkpoints, Reservation};
use crate::job::identity::JobIdentity;
use crate::job::state::{JobState, State, StateSetup, StateType};
use crate::job::JobError;
use crate::payload::delay::Delay;
use crate::payload::{LogContext, WorkflowIds};
use crate::queue::hold::Holds;
use crate::queue::{Extensions, RedisQueue};

/// The handler's view of the job it runs. Derefs to its [`JobIdentity`]: `ctx.uuid()`,
/// `ctx.job_name()`, `ctx.queue()` and `ctx.attempt()`.
///
/// ```
/// use redjob::{job, Job, JobContext, JobResult};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SyncAccount { account: u64 }
///
/// #[job]
/// impl Job for SyncAccount {
///     async fn handle(&self, ctx: &JobContext) -> JobResult {
///         if self.account == 0 {
///             ctx.fail("account 0 does not exist"); // no retry
///         } else if ctx.attempt() < 3 {
///             ctx.release(10); // try again in 10 s; this counts as an attempt
///         }
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug)]
pub struct JobContext {
    identity: JobIdentity,
    request: Mutex<Option<Request>>,
    redis: Option<Arc<RedisQueue>>,
    lease: Duration,
    holds: Arc<Holds>,
    state: JobState,
    log_context: LogContext,
    workflows: WorkflowIds,
    // Made on first use: most attempts keep no capability state.
    extensions: OnceLock<Extensions>,
    cancellation: CancellationToken,
    stopping: CancellationToken,
    // The handler's output, serialized; set once it returns it.
    output: OnceLock<Result<String, String>>,
    progress: Mutex<Option<String>>,
    progress_sink: OnceLock<Arc<dyn ProgressSink>>,
    checkpoints: Checkpoints,
}

/// Where a context sends the progress its job reports: the capability that keeps it in Redis
/// (see [`crate::status`]) installs one for every attempt a worker runs.
pub trait ProgressSink: Send + Sync + std::fmt::Debug {
    /// The job of `ctx` reported `progress` (JSON).
    fn report(&self, ctx: &JobContext, progress: &str);
}

/// The largest progress value kept, in bytes of JSON: progress is for small values (a
/// percentage, counts, a short message); a larger one is dropped with a warning.
pub const MAX_PROGRESS_BYTES: usize = 4096;

/// What a handler or a middleware asked for through its context, applied when the attempt
/// ends.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// Run the job again after this delay; the attempt counts towards its tries.
    Release(Duration),
    /// Run the job again after this delay without counting the attempt (a limit or a lock
    /// that is not free yet). A job requeued more often than the worker allows is released
    /// instead, so it cannot come back forever.
    Requeue(Duration),
    /// Settle the job as done without running the rest of it.
    Skip,
    /// Record the job as failed with this message, whatever tries are left.
    Fail(String),
    /// Put the job back at once with this attempt given back: its worker is stopping.
    Interrupt,
}

impl JobContext {
    /// A context for attempt `attempt` (counting from 1) of a job.
    pub fn new(uuid: Uuid, job: impl Into<String>, queue: impl Into<String>, attempt: u32) -> Self {
        JobContext {
            identity: JobIdentity::new(uuid, job, queue, attempt),
            request: Mutex::new(None),
            redis: None,
            lease: Duration::from_secs(90),
            holds: Arc::default(),
            state: JobState::default(),
            log_context: LogContext::default(),
            workflows: WorkflowIds::default(),
            extensions: OnceLock::new(),
            cancellation: CancellationToken::new(),
            stopping: CancellationToken::new(),
            output: OnceLock::new(),
            progress: Mutex::new(None),
            progress_sink: OnceLock::new(),
            checkpoints: Checkpoints::default(),
        }
    }

    /// Completes when the job is cancelled ([`RedisQueue::cancel`], `jobsctl cancel`), for a
    /// handler to select on and stop cleanly; never completes otherwise. A handler that does
    /// not stop is stopped at its next `.await` after the worker's cancel grace
    /// (`--cancel-grace`). However the handler then returns, the job's outcome is
    /// "cancelled": it is not retried, and its `failed()` hook runs with that reason.
    ///
    /// ```
    /// use redjob::{job, Job, JobContext, JobResult};
    /// use serde::{Deserialize, Serialize};
    /// # async fn export_part(_: usize) {}
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Export { parts: usize }
    ///
    /// #[job(track)]
    /// impl Job for Export {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         for part in 0..self.parts {
    ///             tokio::select! {
    ///                 _ = ctx.cancelled() => return Err("cancelled".into()),
    ///                 _ = export_part(part) => {}
    ///             }
    ///             ctx.progress(100 * (part + 1) / self.parts);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancellation.cancelled()
    }

    /// Whether the job was cancelled while it ran (see [`cancelled`](Self::cancelled)).
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// Completes when the worker running the job is asked to stop (SIGTERM, a deploy); never
    /// completes otherwise. The worker then gives running jobs its grace period (`--grace`)
    /// and puts back those still running after it, their attempt given back. A long handler
    /// can select on this, save what it must, and call [`interrupt`](Self::interrupt) and
    /// return at once, so that another worker takes the job without waiting for the grace
    /// period to end.
    ///
    /// ```
    /// use redjob::{job, Job, JobContext, JobResult};
    /// use serde::{Deserialize, Serialize};
    /// # async fn import_row(_: usize) {}
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Import { rows: usize }
    ///
    /// #[job]
    /// impl Job for Import {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         for row in 0..self.rows {
    ///             if ctx.is_stopping() {
    ///                 ctx.interrupt(); // back on its queue, this attempt not counted
    ///                 return Ok(());
    ///             }
    ///             import_row(row).await;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn stopping(&self) -> WaitForCancellationFuture<'_> {
        self.stopping.cancelled()
    }

    /// Whether the worker running the job is stopping (see [`stopping`](Self::stopping)).
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Reports the job's progress: a percentage (`ctx.progress(40)`) or a small JSON value
    /// (`ctx.progress(json!({ "done": 4, "of": 10 }))`), kept in the job's status for other
    /// processes to read ([`RedisQueue::status`], `jobsctl status`, the dashboard) while it runs
    /// and for a while after. Reports are cheap to make often: Redis is written at most once
    /// every 250 ms per job, and the last value when the job settles. A value that does not
    /// serialize, or is larger than [`MAX_PROGRESS_BYTES`], is dropped with a warning.
    pub fn progress(&self, progress: impl serde::Serialize) {
        let json = match serde_json::to_string(&progress) {
            Ok(json) if json.len() <= MAX_PROGRESS_BYTES => json,
            Ok(json) => {
                tracing::warn!(
                    bytes = json.len(),
                    "progress larger than {MAX_PROGRESS_BYTES} bytes dropped"
                );
                return;
            }
            Err(err) => {
                tracing::warn!(error = %err, "progress that does not serialize dropped");
                return;
            }
        };
        if let Some(sink) = self.progress_sink.get() {
            sink.report(self, &json);
        }
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = Some(json);
    }

    /// The last progress the job reported, as JSON.
    pub fn last_progress(&self) -> Option<String> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Saves a checkpoint of the job's own, a serializable cursor or step: where a later
    /// attempt starts from, when this one is interrupted by a stopping worker, released, or
    /// lost with a crashed worker ([`last_checkpoint`](Self::last_checkpoint)). For a job type
    /// marked `#[job(resumable)]` it is written to Redis in one step with the extension of the
    /// attempt's reservation, and only while the reservation is held: a checkpoint never
    /// precedes nor outlives the attempt it belongs to, and settling the job done or failed
    /// deletes it in the step that acknowledges it. It costs one round trip. Elsewhere (a
    /// type not marked resumable, a fake, a synchronous run) it is kept in the context only.
    ///
    /// `Err` when it does not serialize, or cannot be written (Redis is away, or the
    /// reservation was lost: another worker may run the job now); the handler should stop.
    ///
    /// ```
    /// use redjob::{job, Job, JobContext, JobResult};
    /// use serde::{Deserialize, Serialize};
    /// # async fn export_row(_: u64) {}
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Export { rows: u64 }
    ///
    /// #[job(resumable)]
    /// impl Job for Export {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         let start: u64 = ctx.last_checkpoint()?.unwrap_or(0);
    ///         for row in start..self.rows {
    ///             export_row(row).await;
    ///             if row % 1000 == 999 {
    ///                 ctx.checkpoint(&(row + 1)).await?;
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn checkpoint<T: serde::Serialize + ?Sized>(
        &self,
        checkpoint: &T,
    ) -> Result<(), JobError> {
        let json = serde_json::to_string(checkpoint)
            .map_err(|err| JobError::msg(format!("the checkpoint does not serialize: {err}")))?;
        if let Some(store) = self.checkpoints.store() {
            store
                .save(&json)
                .await
                .map_err(|why| JobError::msg(format!("the checkpoint was not saved: {why}")))?;
        }
        self.checkpoints.set_last(Some(json));
        Ok(())
    }

    /// The last checkpoint the job saved ([`checkpoint`](Self::checkpoint)), by this attempt
    /// or an earlier one; `None` when it saved none. `Err` when this version of the job cannot
    /// read it (its type changed between releases): returning that error fails the attempt,
    /// with the reason; a job that would rather start again from zero ignores it
    /// (`ctx.last_checkpoint().ok().flatten()`).
    pub fn last_checkpoint<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>, JobError> {
        let Some(json) = self.checkpoints.last() else {
            return Ok(None);
        };
        serde_json::from_str(&json).map(Some).map_err(|err| {
            JobError::msg(format!(
                "its checkpoint cannot be read by this version of the job: {err} (checkpoint {json})"
            ))
        })
    }

    /// The reservation this attempt runs under, when the worker gave it (resumable jobs).
    pub(crate) fn reservation(&self) -> Option<&Reservation> {
        self.checkpoints.reservation()
    }

    /// Saves this attempt's checkpoints through `store` from now on; the first store set
    /// stays.
    pub(crate) fn keep_checkpoints_in(&self, store: Arc<dyn CheckpointStore>) {
        self.checkpoints.keep_in(store);
    }

    /// Sets the checkpoint this attempt starts from.
    pub(crate) fn resume_from(&self, checkpoint: Option<String>) {
        self.checkpoints.set_last(checkpoint);
    }

    /// Sends the progress of this attempt to `sink` from now on; the first sink set stays.
    pub(crate) fn send_progress_to(&self, sink: Arc<dyn ProgressSink>) {
        let _ = self.progress_sink.set(sink);
    }

    /// Keeps the handler's output, serialized, unless its type is zero-sized (`()`, a unit
    /// struct): such an output says nothing a `done` state does not.
    pub(crate) fn keep_output<T: serde::Serialize>(&self, output: &T) {
        if std::mem::size_of::<T>() == 0 {
            return;
        }
        let serialized = serde_json::to_string(output).map_err(|err| err.to_string());
        let _ = self.output.set(serialized);
    }

    /// The handler's output, serialized, if it returned one worth keeping; `Err` says why it
    /// could not be serialized.
    pub fn output(&self) -> Option<&Result<String, String>> {
        self.output.get()
    }

    /// State that capabilities keep for this attempt, one value per type (a workflow's
    /// edits, ...).
    pub fn extensions(&self) -> &Extensions {
        self.extensions.get_or_init(Extensions::default)
    }

    /// The workflows the job belongs to, as its payload names them.
    pub(crate) fn workflow_ids(&self) -> WorkflowIds {
        self.workflows
    }

    /// The value of type `T` in this attempt's extensions, if one was stored; makes none.
    pub(crate) fn extension<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.extensions.get()?.get::<T>()
    }

    /// The application state of type `T` that the worker was given (a database pool, an
    /// HTTP client, ...), declared by the job type with `#[job(state = T)]`:
    ///
    /// ```
    /// use redjob::{job, Job, JobContext, JobResult};
    /// use serde::{Deserialize, Serialize};
    ///
    /// struct Db { url: String } // a connection pool, in a real service
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct ShipOrder { id: i64 }
    ///
    /// #[job(state = Db)]
    /// impl Job for ShipOrder {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         let db = ctx.state::<Db>();
    ///         println!("shipping order {} from {}", self.id, db.url);
    ///         Ok(())
    ///     }
    /// }
    /// ```
    ///
    /// A worker refuses to start without the state its job types declare, and so do
    /// synchronous runs and the inline fake of `redjob_worker::testing`; reading it cannot
    /// fail while the job runs.
    ///
    /// # Panics
    ///
    /// When the job type does not declare `T`: the first run of the job, in a test or
    /// anywhere, says so, rather than a worker without `T` failing the job in production. The
    /// panic fails the attempt as any panic does. Middleware and optional state use
    /// [`try_state`](Self::try_state).
    #[track_caller]
    pub fn state<T: Send + Sync + 'static>(&self) -> &T {
        self.state.declared(self.job_name())
    }

    /// The application state of type `T`, if the worker was given one; for middleware, and
    /// for state a job can do without. Needs no declaration.
    pub fn try_state<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.state.get::<T>()
    }

    /// Laravel's Context the job was dispatched with (empty when it has none), read-only. To
    /// pass it on to the jobs this one dispatches, as Laravel does, give it to their
    /// dispatch: `.log_context(ctx.log_context().clone())`.
    ///
    /// ```
    /// # use redjob::{job, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct Export { id: u64 }
    /// # #[job] impl Job for Export { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # #[derive(Serialize, Deserialize)] struct Import;
    /// #[job]
    /// impl Job for Import {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         if let Some(tenant) = ctx.log_context().get("tenant") {
    ///             tracing::info!(%tenant, "importing");
    ///         }
    ///         Export { id: 7 }.dispatch().log_context(ctx.log_context().clone()).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn log_context(&self) -> &LogContext {
        &self.log_context
    }

    /// The worker's Redis handle (`None` when the job runs outside a worker), for a handler
    /// or a middleware that keeps data of its own in Redis: [`RedisQueue::query`] sends a
    /// command through it, built with the re-exported [`redis`] crate.
    pub fn redis(&self) -> Option<&RedisQueue> {
        self.redis.as_deref()
    }

    /// How long a hold taken for this attempt lasts unless the worker renews it: the
    /// worker's `retry_after`.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The token that owns what this attempt holds: the uuid and the attempt number, so a
    /// run after a crash does not take over the holds of the run that crashed.
    pub fn owner(&self) -> String {
        format!("{}:{}", self.uuid(), self.attempt())
    }

    /// What this attempt holds in Redis, renewed while it runs and freed when it settles.
    pub fn holds(&self) -> &Arc<Holds> {
        &self.holds
    }

    /// Puts the job back to run again after `delay` (seconds, or a `Duration`) once the
    /// handler returns. The attempt still counts towards the job's tries.
    pub fn release(&self, delay: impl Into<Delay>) {
        let delay = delay.into().duration_from_now();
        self.set(Request::Release(delay));
    }

    /// Puts the job back to run again after `delay` without counting this attempt: for a
    /// resource that is busy rather than an attempt that failed. The worker bounds how often a
    /// job is requeued (`--max-requeues`); past that, a requeue counts as a release.
    pub fn requeue(&self, delay: impl Into<Delay>) {
        let delay = delay.into().duration_from_now();
        self.set(Request::Requeue(delay));
    }

    /// Puts the job back on its queue at once when the handler returns, this attempt given
    /// back, as a worker does with a job still running when its grace period ends: for a
    /// handler that sees its worker [`stopping`](Self::stopping). The payload counts its
    /// interruptions; past the worker's `--max-interruptions` the job fails instead, so that
    /// a job interrupted forever cannot come back unseen.
    pub fn interrupt(&self) {
        self.set(Request::Interrupt);
    }

    /// Settles the job as done once the attempt returns, without running what is left of it
    /// (a middleware that skips a job calls this instead of running the handler).
    pub fn skip(&self) {
        self.set(Request::Skip);
    }

    /// Marks the job as failed with `message` once the handler returns; it is not retried.
    pub fn fail(&self, message: impl Into<String>) {
        self.set(Request::Fail(message.into()));
    }

    fn set(&self, request: Request) {
        *self.request.lock().unwrap_or_else(|e| e.into_inner()) = Some(request);
    }
}

impl StateSetup for JobContext {
    fn with_state(mut self, state: &State, declared: &'static [StateType]) -> Self {
        self.state = JobState::new(state, declared);
        self
    }
}

impl Deref for JobContext {
    type Target = JobIdentity;

    fn deref(&self) -> &JobIdentity {
        &self.identity
    }
}

/// How a worker sets up a job's context and reads what the attempt asked for. Not a public
/// API: exported from the hidden `redjob::__worker` module.
pub trait AttemptSetup {
    /// This context with the worker's Redis handle, for middleware that keeps its state in
    /// Redis, and the worker's `retry_after`, the lease of what they hold.
    fn with_redis(self, redis: impl Into<Arc<RedisQueue>>, lease: Duration) -> Self;

    /// This context recording what the attempt holds in `holds` (the worker's heartbeat
    /// renews what it finds there).
    fn with_holds(self, holds: Arc<Holds>) -> Self;

    /// This context with Laravel's Context the job's payload carries.
    fn with_log_context(self, log_context: LogContext) -> Self;

    /// This context in the workflows the job's payload names.
    fn with_workflows(self, workflows: WorkflowIds) -> Self;

    /// What the handler asked for, if anything; the last call wins.
    fn take_request(&self) -> Option<Request>;

    /// The token that cancels this attempt: the worker fires it when the job is cancelled.
    fn cancellation(&self) -> &CancellationToken;

    /// This context told that its worker is stopping when `stopping` is cancelled.
    fn with_stopping(self, stopping: CancellationToken) -> Self;

    /// This context running under `reservation`, under which its checkpoints are saved.
    fn with_reservation(self, reservation: Reservation) -> Self;

    /// This context starting from `checkpoint` (JSON), as a synchronous run given one does.
    fn resuming_from(self, checkpoint: Option<String>) -> Self;

    /// The last checkpoint of the attempt, as JSON, for the next attempt of a synchronous run.
    fn checkpoint_json(&self) -> Option<String>;

    /// Whether the attempt has a checkpoint, read back or saved: only then is there one in
    /// Redis to show.
    fn has_checkpoint(&self) -> bool;
}

impl AttemptSetup for JobContext {
    fn with_redis(mut self, redis: impl Into<Arc<RedisQueue>>, lease: Duration) -> Self {
        self.redis = Some(redis.into());
        self.lease = lease;
        self
    }

    fn with_holds(mut self, holds: Arc<Holds>) -> Self {
        self.holds = holds;
        self
    }

    fn with_log_context(mut self, log_context: LogContext) -> Self {
        self.log_context = log_context;
        self
    }

    fn with_workflows(mut self, workflows: WorkflowIds) -> Self {
        self.workflows = workflows;
        self
    }

    fn take_request(&self) -> Option<Request> {
        self.request
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    fn with_stopping(mut self, stopping: CancellationToken) -> Self {
        self.stopping = stopping;
        self
    }

    fn with_reservation(self, reservation: Reservation) -> Self {
        self.checkpoints.set_reservation(reservation);
        self
    }

    fn resuming_from(self, checkpoint: Option<String>) -> Self {
        self.resume_from(checkpoint);
        self
    }

    fn checkpoint_json(&self) -> Option<String> {
        self.checkpoints.last()
    }

    fn has_checkpoint(&self) -> bool {
        self.checkpoints.has_last()
    }
}
