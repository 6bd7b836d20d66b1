//! What an application builds: a [`Chain`] of jobs run one after another and a [`Batch`] of
//! jobs run independently with callbacks. Each can hold the other (a batch as a link of a
//! chain, chains as jobs of a batch), so both are defined here; [`plan`](super::plan) seals
//! them for Redis and [`start`](super::start) pushes them.

use crate::dispatch::{AnyDispatch, PendingDispatch};
use crate::error::Result;
use crate::job::Job;
use crate::payload::delay::Delay;
use crate::queue::RedisQueue;

/// Jobs of any types that run one after another: each link is pushed when the one before it
/// is done, in the same step that acknowledges it. A link that fails for good stops the chain
/// and pushes the catch job, once; a link released to run again keeps its place.
///
/// ```no_run
/// # use redjob::{job, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct ImportFile { file: u64 }
/// # #[job] impl Job for ImportFile { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct IndexFile { file: u64 }
/// # #[job] impl Job for IndexFile { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct MailOwner { file: u64 }
/// # #[job] impl Job for MailOwner { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct ReportFailure { file: u64 }
/// # #[job] impl Job for ReportFailure { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # async fn demo() -> Result<(), redjob::Error> {
/// use redjob::workflow::Chain;
///
/// let chain = Chain::new(ImportFile { file: 7 }.dispatch())
///     .then(IndexFile { file: 7 }.dispatch())
///     .then(MailOwner { file: 7 }.dispatch().delay(60).on_queue("mail"))
///     .catch(ReportFailure { file: 7 }.dispatch())
///     .on_queue("imports") // for the links whose dispatch and job type name no queue
///     .dispatch()
///     .await?; // the chain's id: its first job's uuid
/// # Ok(()) }
/// ```
#[must_use = "a chain does nothing until it is dispatched"]
pub struct Chain {
    pub(crate) links: Vec<Step>,
    pub(crate) catch: Option<Box<dyn AnyDispatch>>,
    pub(crate) queue: Option<String>,
    pub(crate) delay: Option<Delay>,
    via: Option<RedisQueue>,
}

/// One link of a chain: a job, or a batch whose jobs all run before the chain goes on.
pub(crate) enum Step {
    Job(Box<dyn AnyDispatch>),
    Batch(Box<Batch>),
}

impl Chain {
    /// A chain that starts with `first`.
    pub fn new<J: Job>(first: PendingDispatch<J>) -> Chain {
        Chain {
            links: vec![Step::Job(Box::new(first))],
            catch: None,
            queue: None,
            delay: None,
            via: None,
        }
    }

    /// Runs `next` once every link before it is done.
    pub fn then<J: Job>(mut self, next: PendingDispatch<J>) -> Chain {
        self.links.push(Step::Job(Box::new(next)));
        self
    }

    /// Runs `batch` once every link before it is done, and goes on once every job of the batch
    /// has succeeded: the link after it is the batch's `then` (after the batch's own `then`,
    /// which becomes a link of the chain). When a job of the batch fails for good, the chain
    /// stops and its catch job runs (the batch's `catch`; a batch in a chain with a catch job
    /// cannot have one of its own). The batch is created with the chain, its jobs parked until
    /// the chain reaches it. A batch cannot be the first link, follow another batch directly,
    /// or hold chains of its own.
    pub fn then_batch(mut self, batch: Batch) -> Chain {
        self.links.push(Step::Batch(Box::new(batch)));
        self
    }

    /// Pushes `job` when a link fails for good (after its last try), once; the links after the
    /// failed one do not run.
    pub fn catch<J: Job>(mut self, job: PendingDispatch<J>) -> Chain {
        self.catch = Some(Box::new(job));
        self
    }

    /// Puts the links whose dispatch and job type name no queue (and the catch job) on this
    /// queue instead of `default`.
    pub fn on_queue(mut self, queue: impl Into<String>) -> Chain {
        self.queue = Some(queue.into());
        self
    }

    /// Starts the chain no earlier than after this delay (its first link's own delay wins).
    pub fn delay(mut self, delay: impl Into<Delay>) -> Chain {
        self.delay = Some(delay.into());
        self
    }

    /// Pushes through this handle instead of the process-wide default.
    pub fn via(mut self, queue: &RedisQueue) -> Chain {
        self.via = Some(queue.clone());
        self
    }

    /// The handle it pushes through.
    pub(crate) fn handle(&self) -> Result<RedisQueue> {
        RedisQueue::given_or_default(self.via.clone())
    }
}

/// Jobs of any types run independently as one batch, with jobs (not closures) as callbacks:
/// `then` once every job succeeded, `catch` at the first job that fails for good, `finally`
/// once every job has settled. Each job is counted in the script call that settles it, once
/// per uuid however often it runs, so the counts are exact and each callback is pushed once.
///
/// A job that fails for good cancels its batch, unless the batch allows failures; the jobs of
/// a cancelled batch that have not started are settled as done without running (skipped).
///
/// ```no_run
/// # use redjob::{job, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct ImportRow { row: u64 }
/// # #[job] impl Job for ImportRow { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct ImportDone { file: u64 }
/// # #[job] impl Job for ImportDone { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct ImportFailed { file: u64 }
/// # #[job] impl Job for ImportFailed { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # async fn demo() -> Result<(), redjob::Error> {
/// use redjob::workflow::Batch;
///
/// let id = Batch::new()
///     .name("import file 42")
///     .jobs((0..10_000).map(|row| ImportRow { row }.dispatch()))
///     .then(ImportDone { file: 42 }.dispatch())
///     .catch(ImportFailed { file: 42 }.dispatch())
///     .on_queue("imports")
///     .dispatch()
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a batch does nothing until it is dispatched"]
#[derive(Default)]
pub struct Batch {
    pub(crate) name: String,
    pub(crate) members: Vec<Member>,
    pub(crate) callbacks: [Option<Box<dyn AnyDispatch>>; 3],
    pub(crate) allow_failures: bool,
    pub(crate) queue: Option<String>,
    via: Option<RedisQueue>,
}

/// One job of a batch, or one chain whose links are all jobs of the batch.
pub(crate) enum Member {
    Job(Box<dyn AnyDispatch>),
    Chain(Chain),
}

impl Batch {
    /// An empty batch. Dispatched empty, it finishes at once: `then` and `finally` are pushed.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Names the batch, for operators.
    pub fn name(mut self, name: impl Into<String>) -> Batch {
        self.name = name.into();
        self
    }

    /// Adds a job.
    pub fn job<J: Job>(mut self, job: PendingDispatch<J>) -> Batch {
        self.members.push(Member::Job(Box::new(job)));
        self
    }

    /// Adds jobs.
    pub fn jobs<J: Job>(mut self, jobs: impl IntoIterator<Item = PendingDispatch<J>>) -> Batch {
        for job in jobs {
            self.members.push(Member::Job(Box::new(job)));
        }
        self
    }

    /// Adds a chain: each of its links is a job of the batch, run in the chain's order. When a
    /// link fails for good, the links after it leave the batch (they will not run).
    pub fn chain(mut self, chain: Chain) -> Batch {
        self.members.push(Member::Chain(chain));
        self
    }

    /// Pushes `job` once every job of the batch has succeeded (not when it was cancelled).
    pub fn then<J: Job>(mut self, job: PendingDispatch<J>) -> Batch {
        self.callbacks[0] = Some(Box::new(job));
        self
    }

    /// Pushes `job` when the first job of the batch fails for good.
    pub fn catch<J: Job>(mut self, job: PendingDispatch<J>) -> Batch {
        self.callbacks[1] = Some(Box::new(job));
        self
    }

    /// Pushes `job` once every job of the batch has settled, succeeded or failed (or skipped
    /// because the batch was cancelled).
    pub fn finally<J: Job>(mut self, job: PendingDispatch<J>) -> Batch {
        self.callbacks[2] = Some(Box::new(job));
        self
    }

    /// Lets the batch run on after a job fails for good; without this, the first failure
    /// cancels it.
    pub fn allow_failures(mut self) -> Batch {
        self.allow_failures = true;
        self
    }

    /// Puts the jobs and callbacks whose dispatch and job type name no queue on this queue
    /// instead of `default`.
    pub fn on_queue(mut self, queue: impl Into<String>) -> Batch {
        self.queue = Some(queue.into());
        self
    }

    /// Pushes through this handle instead of the process-wide default.
    pub fn via(mut self, queue: &RedisQueue) -> Batch {
        self.via = Some(queue.clone());
        self
    }

    /// The handle it pushes through.
    pub(crate) fn handle(&self) -> Result<RedisQueue> {
        RedisQueue::given_or_default(self.via.clone())
    }

    /// Whether the batch has a `then` job of its own.
    pub(crate) fn has_then(&self) -> bool {
        self.callbacks[0].is_some()
    }

    /// Whether any of its jobs is a chain.
    pub(crate) fn has_chains(&self) -> bool {
        self.members.iter().any(|m| matches!(m, Member::Chain(_)))
    }
}
