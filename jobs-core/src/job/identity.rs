//! [`JobIdentity`]: which job and which attempt a context is about, shared by the handler's
//! [`JobContext`](crate::JobContext) and the failed hook's
//! [`FailedContext`](crate::FailedContext).

use uuid::Uuid;

/// Which job a context is about, and which attempt of it. Both contexts deref to it, so
/// `ctx.uuid()`, `ctx.job_name()`, `ctx.queue()` and `ctx.attempt()` read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdentity {
    uuid: Uuid,
    job: String,
    queue: String,
    attempt: u32,
}

impl JobIdentity {
    /// Attempt `attempt` (counting from 1) of the job `uuid`, of type `job`, taken from `queue`.
    pub fn new(uuid: Uuid, job: impl Into<String>, queue: impl Into<String>, attempt: u32) -> Self {
        JobIdentity {
            uuid,
            job: job.into(),
            queue: queue.into(),
            attempt,
        }
    }

    /// The job's uuid, the same on every attempt (the key of its failed-job record).
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
}
