//! A job's workflow as its handler sees it: the chain it is a link of and the batch it belongs
//! to, read from its payload when the attempt starts ([`AttemptHook`]), and the links and jobs
//! its handler adds ([`ChainEdits`], [`BatchEdits`]), pushed in the step that settles it as
//! done ([`WorkflowStep`]).

use std::sync::{Arc, Mutex};
use uuid::Uuid;

use crate::dispatch::{AnyDispatch, PendingDispatch, Placement};
use crate::error::Result;
use crate::job::attempt::{AttemptHook, AttemptHookRegistration};
use crate::job::context::JobContext;
use crate::job::Job;
use crate::payload::Payload;
use crate::queue::settle::SettleStep;
use crate::queue::{Envelope, RedisQueue};
use crate::workflow::link::Link;
use crate::workflow::progress::{BatchProgress, ChainProgress};
use crate::workflow::step::WorkflowStep;

/// The workflow state of one attempt, kept in its context's extensions.
#[derive(Debug, Default)]
struct WorkflowAttempt {
    /// The chain the job is a link of (its first job's uuid).
    chain: Option<Uuid>,
    /// The batch the job belongs to.
    batch: Option<Uuid>,
    /// The batch the job is a callback of.
    callback_of: Option<Uuid>,
    /// The links its handler added to its chain.
    chain_edits: Mutex<ChainAdditions>,
    /// The jobs its handler added to its batch.
    batch_added: Mutex<Vec<Envelope>>,
}

impl WorkflowAttempt {
    /// The attempt's state, made now if it has none (a job of no workflow that starts a
    /// chain).
    fn of(ctx: &JobContext) -> Arc<WorkflowAttempt> {
        ctx.extensions()
            .get_or_insert_with(WorkflowAttempt::default)
    }

    /// The chain the job `job` is a link of, or that its handler started, with the links its
    /// handler added (taken: a second call finds none); `None` for a job that is neither.
    fn take_chain_edits(&self, job: Uuid) -> Option<(Uuid, ChainAdditions)> {
        let edits = std::mem::take(&mut *lock(&self.chain_edits));
        let added = !edits.prepend.is_empty() || !edits.append.is_empty();
        match self.chain {
            Some(chain) => Some((chain, edits)),
            None if added => Some((job, edits)),
            None => None,
        }
    }

    /// The batch the job belongs to and the jobs its handler added to it (taken: a second
    /// call finds none); `None` for a job of no batch.
    fn take_batch_added(&self) -> Option<(Uuid, Vec<Envelope>)> {
        let added = std::mem::take(&mut *lock(&self.batch_added));
        Some((self.batch?, added))
    }
}

impl JobContext {
    /// The batch this job belongs to, if any: its id, and jobs to add to it once this job is
    /// done. Read the batch's progress or cancel it through the worker's handle
    /// ([`RedisQueue::batch`], [`RedisQueue::cancel_batch`]).
    ///
    /// ```
    /// # use redjob::{job, Job, JobContext, JobResult};
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
    pub fn batch(&self) -> Option<BatchEdits> {
        let state = self.extension::<WorkflowAttempt>()?;
        Some(BatchEdits {
            batch: state.batch?,
            queue: self.queue().to_owned(),
            state,
        })
    }

    /// The chain this job is a link of: add links to it, pushed once this job is done. A job
    /// that is not a link starts a chain this way, whose id is its own uuid.
    ///
    /// ```
    /// # use redjob::{job, Job, JobContext, JobResult};
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
    pub fn chain(&self) -> ChainEdits {
        let state = WorkflowAttempt::of(self);
        ChainEdits {
            chain: state.chain.unwrap_or(self.uuid()),
            queue: self.queue().to_owned(),
            state,
        }
    }

    /// The batch this job is a callback of (its `then`, `catch` or `finally`), if it is one:
    /// read the batch with [`RedisQueue::batch`], and its tracked jobs' results with
    /// [`RedisQueue::batch_results`].
    pub fn callback_of(&self) -> Option<Uuid> {
        self.extension::<WorkflowAttempt>()?.callback_of
    }

    /// The chain this job is a link of (its first job's uuid), if it is one.
    pub fn chain_id(&self) -> Option<Uuid> {
        self.extension::<WorkflowAttempt>()?.chain
    }
}

/// The chain this job is a link of, or that its handler started, with the links its handler
/// added (taken: a second call finds none); `None` for a job that is neither.
pub fn take_chain_edits(ctx: &JobContext) -> Option<(Uuid, ChainAdditions)> {
    ctx.extension::<WorkflowAttempt>()?
        .take_chain_edits(ctx.uuid())
}

/// The batch this job belongs to and the jobs its handler added to it (taken: a second call
/// finds none); `None` for a job of no batch.
pub fn take_batch_added(ctx: &JobContext) -> Option<(Uuid, Vec<Envelope>)> {
    ctx.extension::<WorkflowAttempt>()?.take_batch_added()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The workflow's part in every attempt.
struct Workflows;

inventory::submit!(AttemptHookRegistration(&Workflows));

impl AttemptHook for Workflows {
    fn start(&self, payload: &Payload, ctx: &JobContext) {
        if payload.chain.is_some() || payload.batch.is_some() || payload.callback_of.is_some() {
            ctx.extensions().insert(WorkflowAttempt {
                chain: payload.chain,
                batch: payload.batch,
                callback_of: payload.callback_of,
                ..WorkflowAttempt::default()
            });
        }
    }

    /// A job that is done pushes the links and jobs its handler added, sealed now. A link or
    /// job that cannot be sealed fails the job that added it.
    fn done(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
    ) -> std::result::Result<Option<Box<dyn SettleStep>>, String> {
        // Most jobs belong to no workflow and their handlers add nothing: no state was kept.
        let Some(state) = ctx.extension::<WorkflowAttempt>() else {
            return Ok(None);
        };
        let step = done_step(&state, ctx.uuid(), queue)
            .map_err(|err| format!("cannot add a job to its workflow: {err}"))?;
        Ok(step.boxed())
    }

    /// A job that failed drops what its handler added, with the attempt.
    fn failed(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
        _reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        let state = ctx.extension::<WorkflowAttempt>()?;
        let job = ctx.uuid();
        WorkflowStep {
            job,
            chain: state.chain.map(|chain| ChainProgress::new(chain, job)),
            batch: state.batch.map(|batch| BatchProgress::new(batch, job)),
        }
        .boxed()
    }
}

/// The step of the job `job` that is done: its chain and its batch, with the links and jobs
/// its handler added, sealed now.
fn done_step(state: &WorkflowAttempt, job: Uuid, queue: &RedisQueue) -> Result<WorkflowStep> {
    let chain = match state.take_chain_edits(job) {
        Some((id, edits)) => Some(ChainProgress {
            id,
            link: job,
            prepend: Link::sealed_all(queue, edits.prepend)?,
            append: Link::sealed_all(queue, edits.append)?,
        }),
        None => None,
    };
    let batch = match state.take_batch_added() {
        Some((id, added)) => Some(BatchProgress {
            id,
            job,
            added: Link::sealed_all(queue, added)?,
        }),
        None => None,
    };
    Ok(WorkflowStep { job, chain, batch })
}

/// The links a running job adds to its chain, pushed when it is done (in the step that
/// acknowledges it) and dropped if it is released or fails. Get it from
/// [`JobContext::chain`](crate::JobContext::chain).
///
/// A job that is not a link starts a chain of its own this way: it is the chain's first link.
#[derive(Debug)]
pub struct ChainEdits {
    chain: Uuid,
    queue: String,
    state: Arc<WorkflowAttempt>,
}

/// What a running job's handler added to its chain.
#[derive(Debug, Default)]
pub struct ChainAdditions {
    /// Links to run right after this one, in the order they were prepended.
    pub prepend: Vec<Envelope>,
    /// Links to run after the rest of the chain, in order.
    pub append: Vec<Envelope>,
}

impl ChainEdits {
    /// Runs `job` right after this link, before the rest of the chain. Of several prepended
    /// jobs the last one runs first, as Laravel's `prependToChain`. A job that names no queue
    /// goes to this link's.
    pub fn prepend<J: Job>(&self, job: PendingDispatch<J>) -> Result<()> {
        let envelope = self.envelope(&job)?;
        self.lock().prepend.push(envelope);
        Ok(())
    }

    /// Runs `job` after the rest of the chain. A job that names no queue goes to this link's.
    pub fn append<J: Job>(&self, job: PendingDispatch<J>) -> Result<()> {
        let envelope = self.envelope(&job)?;
        self.lock().append.push(envelope);
        Ok(())
    }

    fn envelope(&self, job: &dyn AnyDispatch) -> Result<Envelope> {
        job.envelope_in(&Placement {
            chain: Some(self.chain),
            // The batch the chain's links belong to, which the added links join.
            batch: self.state.batch,
            queue: Some(self.queue.clone()),
            ..Placement::default()
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ChainAdditions> {
        lock(&self.state.chain_edits)
    }
}

/// The batch a running job belongs to: jobs added through it are pushed, and counted in the
/// batch, once this job is done (in the step that acknowledges it), and dropped if it is
/// released or fails. Get it from [`JobContext::batch`](crate::JobContext::batch).
#[derive(Debug)]
pub struct BatchEdits {
    batch: Uuid,
    queue: String,
    state: Arc<WorkflowAttempt>,
}

impl BatchEdits {
    /// The batch's id.
    pub fn id(&self) -> Uuid {
        self.batch
    }

    /// Adds `job` to the batch once this job is done. A job that names no queue goes to this
    /// job's.
    pub fn add<J: Job>(&self, job: PendingDispatch<J>) -> Result<()> {
        let envelope = job.envelope_in(&Placement {
            batch: Some(self.batch),
            queue: Some(self.queue.clone()),
            ..Placement::default()
        })?;
        lock(&self.state.batch_added).push(envelope);
        Ok(())
    }
}
