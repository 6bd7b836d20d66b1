//! Workflows: chains of jobs, each link pushed in the step that acknowledges the one before it,
//! and batches of jobs, each counted in the step that settles it.
//!
//! Every step of a workflow happens in the script call that settles the job causing it: the
//! next link is pushed in the call that acknowledges a finished link, a chain's catch job in
//! the call that records a failed link, a batch's job counted (and the batch's callbacks pushed
//! when it is the last) in the call that settles it, and only if that job's reservation was
//! still held. So a worker that dies at any moment never pushes a link twice and never loses
//! one: the job it ran comes back after `retry_after` and takes the step then.
//!
//! A chain's links are built and signed when the chain is dispatched and kept in Redis, each
//! once ([`Link`]), so the bytes written grow linearly with the chain's length (Laravel
//! copies the whole remainder into every link). See `docs/workflows.md` in the repository.

mod apart;
pub(crate) mod batch;
pub(crate) mod chain;
mod link;
mod status;

pub use batch::{Batch, BatchProgress};
pub use chain::{Chain, ChainProgress};
pub use link::Link;
pub use status::BatchStatus;

use std::sync::Mutex;
use uuid::Uuid;

use crate::dispatch::{AnyDispatch, Placement};
use crate::error::Result;
use crate::job::Job;
use crate::queue::Envelope;
use crate::PendingDispatch;

/// The links a running job adds to its chain, pushed when it is done (in the step that
/// acknowledges it) and dropped if it is released or fails. Get it from
/// [`JobContext::chain`](crate::JobContext::chain).
///
/// A job that is not a link starts a chain of its own this way: it is the chain's first link.
#[derive(Debug)]
pub struct ChainEdits<'a> {
    pub(crate) chain: Uuid,
    /// The batch the chain's links belong to, which the added links join.
    pub(crate) batch: Option<Uuid>,
    pub(crate) queue: &'a str,
    pub(crate) edits: &'a Mutex<ChainAdditions>,
}

/// What a running job's handler added to its chain.
#[derive(Debug, Default)]
pub struct ChainAdditions {
    /// Links to run right after this one, in the order they were prepended.
    pub prepend: Vec<Envelope>,
    /// Links to run after the rest of the chain, in order.
    pub append: Vec<Envelope>,
}

impl ChainEdits<'_> {
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
            queue: Some(self.queue.to_owned()),
            ..Placement::default()
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ChainAdditions> {
        self.edits.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The batch a running job belongs to: jobs added through it are pushed, and counted in the
/// batch, once this job is done (in the step that acknowledges it), and dropped if it is
/// released or fails. Get it from [`JobContext::batch`](crate::JobContext::batch).
#[derive(Debug)]
pub struct BatchEdits<'a> {
    pub(crate) batch: Uuid,
    pub(crate) queue: &'a str,
    pub(crate) added: &'a Mutex<Vec<Envelope>>,
}

impl BatchEdits<'_> {
    /// The batch's id.
    pub fn id(&self) -> Uuid {
        self.batch
    }

    /// Adds `job` to the batch once this job is done. A job that names no queue goes to this
    /// job's.
    pub fn add<J: Job>(&self, job: PendingDispatch<J>) -> Result<()> {
        let envelope = job.envelope_in(&Placement {
            batch: Some(self.batch),
            queue: Some(self.queue.to_owned()),
            ..Placement::default()
        })?;
        self.added
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(envelope);
        Ok(())
    }
}
