//! What a job's [`failed`](crate::Job::failed) hook is told about its failure.

use uuid::Uuid;

/// A job that has failed for good: recorded in the failed-job store, and not run again unless
/// an operator retries it.
#[derive(Debug, Clone)]
pub struct FailedContext {
    uuid: Uuid,
    job: String,
    queue: String,
    attempt: u32,
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
            uuid,
            job: job.into(),
            queue: queue.into(),
            attempt,
            reason: reason.into(),
        }
    }

    /// The job's uuid: the key of its failed-job record.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// The job's registered name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The queue it was taken from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The attempt that failed it (1 on the first run).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Why it failed, as its failed-job record says: the last attempt's error, a panic, a
    /// timeout, too many attempts, or a middleware's reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}
