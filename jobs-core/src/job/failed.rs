//! What a job's [`failed`](crate::Job::failed) hook is told about its failure.

use std::ops::Deref;
use uuid::Uuid;

use crate::job::identity::JobIdentity;

/// A job that has failed for good: recorded in the failed-job store, and not run again unless
/// an operator retries it. Derefs to its [`JobIdentity`]: `ctx.uuid()`, `ctx.job_name()`,
/// `ctx.queue()`, and `ctx.attempt()`, the attempt that failed it.
#[derive(Debug, Clone)]
pub struct FailedContext {
    identity: JobIdentity,
    reason: String,
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
        }
    }

    /// Why it failed, as its failed-job record says: the last attempt's error, a panic, a
    /// timeout, too many attempts, or a middleware's reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl Deref for FailedContext {
    type Target = JobIdentity;

    fn deref(&self) -> &JobIdentity {
        &self.identity
    }
}
