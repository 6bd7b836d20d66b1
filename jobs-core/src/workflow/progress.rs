//! What a settling job does to its workflow: [`ChainProgress`] for a link of a chain (or a
//! job whose handler started one), [`BatchProgress`] for a job of a batch.

use uuid::Uuid;

use crate::workflow::link::Link;

/// What a finished or failed link does to its chain: the chain's id, and the links its handler
/// put in front of the rest ([`ChainEdits::prepend`](crate::workflow::ChainEdits::prepend)) or
/// after it.
#[derive(Debug, Clone)]
pub struct ChainProgress {
    /// The chain's id.
    pub id: Uuid,
    /// The uuid of the link that settles, by which a step taken again after a crash is known.
    pub link: Uuid,
    /// Links to run next, the last one prepended first, as Laravel's `prependToChain`.
    pub prepend: Vec<Link>,
    /// Links to run after the rest, in order.
    pub append: Vec<Link>,
}

impl ChainProgress {
    /// The progress of the link `link` of the chain `id` that added no links.
    pub fn new(id: Uuid, link: Uuid) -> Self {
        ChainProgress {
            id,
            link,
            prepend: Vec::new(),
            append: Vec::new(),
        }
    }
}

/// What a finished or failed job does to its batch: the batch's id, and the jobs its handler
/// added to the batch ([`BatchEdits::add`](crate::workflow::BatchEdits::add)).
#[derive(Debug, Clone)]
pub struct BatchProgress {
    /// The batch's id.
    pub id: Uuid,
    /// The job's uuid, by which the batch counts it once.
    pub job: Uuid,
    /// Jobs to push and count in the batch once this one is done.
    pub added: Vec<Link>,
}

impl BatchProgress {
    /// The progress of the job `job` of the batch `id` that added no jobs.
    pub fn new(id: Uuid, job: Uuid) -> Self {
        BatchProgress {
            id,
            job,
            added: Vec::new(),
        }
    }
}
