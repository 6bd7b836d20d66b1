//! A job's workflow as its handler sees it: the chain it is a link of and the batch it belongs
//! to, which its context holds as its payload names them, and the links and jobs its handler
//! adds ([`ChainEdits`], [`BatchEdits`]), pushed in the step that settles it as done
//! ([`WorkflowStep`], given by the workflow's [`AttemptHook`]).

use std::sync::{Arc, Mutex};
use uuid::Uuid;

use crate::dispatch::{AnyDispatch, PendingDispatch, Placement};
use crate::error::Result;
use crate::job::attempt::{AttemptHook, AttemptHookRegistration};
use crate::job::context::JobContext;
use crate::job::Job;
use crate::payload::{Payload, WorkflowIds};
use crate::queue::settle::SettleStep;
use crate::queue::{Envelope, RedisQueue};
use crate::workflow::link::Link;
use crate::workflow::progress::{BatchProgress, ChainProgress};
use crate::workflow::step::WorkflowStep;

/// What one attempt's handler added to its workflows, kept in its context's extensions from
/// its first edit: most jobs of a workflow add nothing, and keep none. The workflows the job
/// belongs to are its context's ([`JobContext::workflow_ids`]).
#[derive(Debug, Default)]
struct WorkflowEdits {
    /// The links its handler added to its chain.
    chain_edits: Mutex<ChainAdditions>,
    /// The jobs its handler added to its batch.
    batch_added: Mutex<Vec<Envelope>>,
}

impl WorkflowEdits {
    /// The attempt's edits, made now if it has none.
    fn of(ctx: &JobContext) -> Arc<WorkflowEdits> {
        ctx.extensions().get_or_insert_with(WorkflowEdits::default)
    }

    /// The links the handler of `ctx` added to its chain, taken: a second call finds none.
    fn take_chain(ctx: &JobContext) -> ChainAdditions {
        ctx.extension::<WorkflowEdits>()
            .map(|edits| std::mem::take(&mut *lock(&edits.chain_edits)))
            .unwrap_or_default()
    }

    /// The jobs the handler of `ctx` added to its batch, taken: a second call finds none.
    fn take_batch(ctx: &JobContext) -> Vec<Envelope> {
        ctx.extension::<WorkflowEdits>()
            .map(|edits| std::mem::take(&mut *lock(&edits.batch_added)))
            .unwrap_or_default()
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
        Some(BatchEdits {
            batch: self.workflow_ids().batch?,
            queue: self.queue().to_owned(),
            state: WorkflowEdits::of(self),
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
        let ids = self.workflow_ids();
        ChainEdits {
            chain: ids.chain.unwrap_or(self.uuid()),
            batch: ids.batch,
            queue: self.queue().to_owned(),
            state: WorkflowEdits::of(self),
        }
    }

    /// The batch this job is a callback of (its `then`, `catch` or `finally`), if it is one:
    /// read the batch with [`RedisQueue::batch`], and its tracked jobs' results with
    /// [`RedisQueue::batch_results`].
    pub fn callback_of(&self) -> Option<Uuid> {
        self.workflow_ids().callback_of
    }

    /// The chain this job is a link of (its first job's uuid), if it is one.
    pub fn chain_id(&self) -> Option<Uuid> {
        self.workflow_ids().chain
    }
}

/// The chain this job is a link of, or that its handler started, with the links its handler
/// added (taken: a second call finds none); `None` for a job that is neither.
pub fn take_chain_edits(ctx: &JobContext) -> Option<(Uuid, ChainAdditions)> {
    let edits = WorkflowEdits::take_chain(ctx);
    let added = !edits.prepend.is_empty() || !edits.append.is_empty();
    match ctx.workflow_ids().chain {
        Some(chain) => Some((chain, edits)),
        None if added => Some((ctx.uuid(), edits)),
        None => None,
    }
}

/// The batch this job belongs to and the jobs its handler added to it (taken: a second call
/// finds none); `None` for a job of no batch.
pub fn take_batch_added(ctx: &JobContext) -> Option<(Uuid, Vec<Envelope>)> {
    let batch = ctx.workflow_ids().batch?;
    Some((batch, WorkflowEdits::take_batch(ctx)))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The workflow's part in every attempt.
struct Workflows;

inventory::submit!(AttemptHookRegistration(&Workflows));

impl AttemptHook for Workflows {
    /// Nothing to attach: the workflows a job belongs to are its context's, and what its
    /// handler adds is kept from its first edit.
    fn start(&self, _payload: &Payload, _ctx: &JobContext) {}

    /// A job that is done pushes the links and jobs its handler added, sealed now. A link or
    /// job that cannot be sealed fails the job that added it.
    fn done(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
    ) -> std::result::Result<Option<Box<dyn SettleStep>>, String> {
        // Most jobs belong to no workflow and their handlers add nothing.
        let edited = ctx.extension::<WorkflowEdits>().is_some();
        if ctx.workflow_ids() == WorkflowIds::default() && !edited {
            return Ok(None);
        }
        let step = done_step(ctx, queue)
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
        let ids = ctx.workflow_ids();
        let job = ctx.uuid();
        WorkflowStep {
            job,
            chain: ids.chain.map(|chain| ChainProgress::new(chain, job)),
            batch: ids.batch.map(|batch| BatchProgress::new(batch, job)),
        }
        .boxed()
    }
}

/// The step of the job of `ctx`, which is done: its chain and its batch, with the links and
/// jobs its handler added, sealed now.
fn done_step(ctx: &JobContext, queue: &RedisQueue) -> Result<WorkflowStep> {
    let job = ctx.uuid();
    let chain = match take_chain_edits(ctx) {
        Some((id, edits)) => Some(ChainProgress {
            id,
            link: job,
            prepend: Link::sealed_all(queue, edits.prepend)?,
            append: Link::sealed_all(queue, edits.append)?,
        }),
        None => None,
    };
    let batch = match take_batch_added(ctx) {
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
    /// The batch the chain's links belong to, which the added links join.
    batch: Option<Uuid>,
    queue: String,
    state: Arc<WorkflowEdits>,
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
            batch: self.batch,
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
    state: Arc<WorkflowEdits>,
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
