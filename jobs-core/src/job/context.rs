//! What a running handler knows about its job, and how it asks for a release or a failure.

use std::sync::Mutex;
use std::time::Duration;
use uuid::Uuid;

/// The handler's view of the job it runs.
///
/// ```
/// use jobs_core::{job, Job, JobContext, JobResult};
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
    uuid: Uuid,
    job: String,
    queue: String,
    attempt: u32,
    request: Mutex<Option<Request>>,
}

/// What a handler asked for through its context, applied when it returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Run the job again after this delay.
    Release(Duration),
    /// Record the job as failed with this message, whatever tries are left.
    Fail(String),
}

impl JobContext {
    /// A context for attempt `attempt` (counting from 1) of a job.
    pub fn new(uuid: Uuid, job: impl Into<String>, queue: impl Into<String>, attempt: u32) -> Self {
        JobContext {
            uuid,
            job: job.into(),
            queue: queue.into(),
            attempt,
            request: Mutex::new(None),
        }
    }

    /// The job's uuid, the same on every attempt.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// The job's registered name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The queue the job was taken from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// This attempt's number: 1 on the first run.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Puts the job back to run again after `delay` (seconds, or a `Duration`) once the
    /// handler returns. The attempt still counts towards the job's tries.
    pub fn release(&self, delay: impl Into<crate::Delay>) {
        let delay = delay.into().duration_from_now();
        *self.request.lock().unwrap_or_else(|e| e.into_inner()) = Some(Request::Release(delay));
    }

    /// Marks the job as failed with `message` once the handler returns; it is not retried.
    pub fn fail(&self, message: impl Into<String>) {
        *self.request.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Request::Fail(message.into()));
    }

    /// What the handler asked for, if anything; the last call wins.
    pub fn take_request(&self) -> Option<Request> {
        self.request
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
