//! What a job's [`failed`](crate::Job::failed) hook is told about its failure.

use std::ops::Deref;
use uuid::Uuid;

use crate::job::identity::JobIdentity;
use crate::job::state::{JobState, State, StateSetup, StateType};

/// A job that has failed for good: recorded in the failed-job store, and not run again unless
/// an operator retries it. Derefs to its [`JobIdentity`]: `ctx.uuid()`, `ctx.job_name()`,
/// `ctx.queue()`, and `ctx.attempt()`, the attempt that failed it.
///
/// The hook reads the application state its worker was given as the handler does, through
/// [`state`](Self::state):
///
/// ```
/// use redjob::{job, FailedContext, Job, JobContext, JobResult};
/// use serde::{Deserialize, Serialize};
///
/// struct Alerts { channel: String } // a chat client, in a real service
///
/// #[derive(Serialize, Deserialize)]
/// struct ImportFeed { feed: u64 }
///
/// #[job(state = Alerts)]
/// impl Job for ImportFeed {
///     async fn handle(&self, _ctx: &JobContext) -> JobResult {
///         Err("the feed is gone".into())
///     }
///
///     async fn failed(&self, ctx: &FailedContext) {
///         let alerts = ctx.state::<Alerts>();
///         println!("to {}: feed {} failed: {}", alerts.channel, self.feed, ctx.reason());
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct FailedContext {
    identity: JobIdentity,
    reason: String,
    state: JobState,
}

impl FailedContext {
    /// The failure of attempt `attempt` of a job, for `reason`.
    pub fn new(
        uuid: Uuid,
        job: impl Into<String>,
        queue: impl Into<String>,
        attempt: u32,
        reason: impl Into<String>,
    ) -> Self {
        FailedContext {
            identity: JobIdentity::new(uuid, job, queue, attempt),
            reason: reason.into(),
            state: JobState::default(),
        }
    }

    /// Why it failed, as its failed-job record says: the last attempt's error, a panic, a
    /// timeout, too many attempts, or a middleware's reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The application state of type `T` that the worker was given, declared by the job type
    /// with `#[job(state = T)]`; as [`JobContext::state`](crate::JobContext::state).
    ///
    /// # Panics
    ///
    /// When the job type does not declare `T`. The panic ends the hook, which the worker logs.
    #[track_caller]
    pub fn state<T: Send + Sync + 'static>(&self) -> &T {
        self.state.declared(self.job_name())
    }

    /// The application state of type `T`, if the worker was given one; needs no declaration.
    pub fn try_state<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.state.get::<T>()
    }
}

impl StateSetup for FailedContext {
    fn with_state(mut self, state: &State, declared: &'static [StateType]) -> Self {
        self.state = JobState::new(state, declared);
        self
    }
}

impl Deref for FailedContext {
    type Target = JobIdentity;

    fn deref(&self) -> &JobIdentity {
        &self.identity
    }
}
