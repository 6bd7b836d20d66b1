//! What a running handler knows about its job, and how it asks for a release or a failure.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

use crate::queue::hold::Holds;
use crate::queue::Envelope;
use crate::queue::RedisQueue;
use crate::workflow::{BatchEdits, ChainAdditions, ChainEdits};

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
    redis: Option<Arc<RedisQueue>>,
    lease: Duration,
    holds: Arc<Holds>,
    chain: Option<Uuid>,
    chain_edits: Mutex<ChainAdditions>,
    batch: Option<Uuid>,
    batch_added: Mutex<Vec<Envelope>>,
}

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
            redis: None,
            lease: Duration::from_secs(90),
            holds: Arc::default(),
            chain: None,
            chain_edits: Mutex::default(),
            batch: None,
            batch_added: Mutex::default(),
        }
    }

    /// This context for a job of the batch `batch`.
    pub fn with_batch(mut self, batch: Option<Uuid>) -> Self {
        self.batch = batch;
        self
    }

    /// The batch this job belongs to, if any: its id, and jobs to add to it once this job is
    /// done. Read the batch's progress or cancel it through the worker's handle
    /// ([`RedisQueue::batch`], [`RedisQueue::cancel_batch`]).
    ///
    /// ```
    /// # use jobs_core::{job, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize)]
    /// struct ImportPage { page: u64, last: u64 }
    ///
    /// #[job]
    /// impl Job for ImportPage {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         if let (Some(batch), true) = (ctx.batch(), self.page < self.last) {
    ///             batch.add(ImportPage { page: self.page + 1, last: self.last }.dispatch())?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn batch(&self) -> Option<BatchEdits<'_>> {
        Some(BatchEdits {
            batch: self.batch?,
            queue: &self.queue,
            added: &self.batch_added,
        })
    }

    /// The batch this job belongs to and the jobs its handler added to it (taken: a second
    /// call finds none); `None` for a job of no batch.
    pub fn batch_progress(&self) -> Option<(Uuid, Vec<Envelope>)> {
        let added =
            std::mem::take(&mut *self.batch_added.lock().unwrap_or_else(|e| e.into_inner()));
        Some((self.batch?, added))
    }

    /// This context for a link of the chain `chain` (its first job's uuid).
    pub fn with_chain(mut self, chain: Option<Uuid>) -> Self {
        self.chain = chain;
        self
    }

    /// The chain this job is a link of: add links to it, pushed once this job is done. A job
    /// that is not a link starts a chain this way, whose id is its own uuid.
    ///
    /// ```
    /// # use jobs_core::{job, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct Audit { file: u64 }
    /// # #[job] impl Job for Audit { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// #[derive(Serialize, Deserialize)]
    /// struct ImportFile { file: u64 }
    ///
    /// #[job]
    /// impl Job for ImportFile {
    ///     async fn handle(&self, ctx: &JobContext) -> JobResult {
    ///         ctx.chain().append(Audit { file: self.file }.dispatch())?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn chain(&self) -> ChainEdits<'_> {
        ChainEdits {
            chain: self.chain.unwrap_or(self.uuid),
            batch: self.batch,
            queue: &self.queue,
            edits: &self.chain_edits,
        }
    }

    /// The chain this job is a link of (its first job's uuid), if it is one.
    pub fn chain_id(&self) -> Option<Uuid> {
        self.chain
    }

    /// The chain this job is a link of, or that its handler started, with the links its
    /// handler added (taken: a second call finds none); `None` for a job that is neither.
    pub fn chain_progress(&self) -> Option<(Uuid, ChainAdditions)> {
        let edits =
            std::mem::take(&mut *self.chain_edits.lock().unwrap_or_else(|e| e.into_inner()));
        let added = !edits.prepend.is_empty() || !edits.append.is_empty();
        match self.chain {
            Some(chain) => Some((chain, edits)),
            None if added => Some((self.uuid, edits)),
            None => None,
        }
    }

    /// This context with the worker's Redis handle, for middleware that keeps its state in
    /// Redis, and the worker's `retry_after`, the lease of what they hold.
    pub fn with_redis(mut self, redis: impl Into<Arc<RedisQueue>>, lease: Duration) -> Self {
        self.redis = Some(redis.into());
        self.lease = lease;
        self
    }

    /// This context recording what the attempt holds in `holds` (the worker's heartbeat
    /// renews what it finds there).
    pub fn with_holds(mut self, holds: Arc<Holds>) -> Self {
        self.holds = holds;
        self
    }

    /// The worker's Redis handle (`None` when the job runs outside a worker).
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
        format!("{}:{}", self.uuid, self.attempt)
    }

    /// What this attempt holds in Redis, renewed while it runs and freed when it settles.
    pub fn holds(&self) -> &Arc<Holds> {
        &self.holds
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
        self.set(Request::Release(delay));
    }

    /// Puts the job back to run again after `delay` without counting this attempt: for a
    /// resource that is busy rather than an attempt that failed. The worker bounds how often a
    /// job is requeued (`--max-requeues`); past that, a requeue counts as a release.
    pub fn requeue(&self, delay: impl Into<crate::Delay>) {
        let delay = delay.into().duration_from_now();
        self.set(Request::Requeue(delay));
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

    /// What the handler asked for, if anything; the last call wins.
    pub fn take_request(&self) -> Option<Request> {
        self.request
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
