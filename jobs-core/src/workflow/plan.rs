//! A workflow as built for Redis: each job's payload built and sealed (signed, checked) into a
//! [`Link`], a chain's links in order with its catch job, a batch's jobs and its callbacks.

use uuid::Uuid;

use crate::dispatch::{AnyDispatch, Placement};
use crate::error::Result;
use crate::payload::delay::Delay;
use crate::queue::RedisQueue;
use crate::workflow::builder::{Batch, Chain, Member, Step};
use crate::workflow::link::Link;
use crate::workflow::record::Callbacks;

impl Chain {
    /// The chain's links, built and sealed by `queue`, each carrying `batch` when the chain is
    /// a job of a batch; links naming no queue go to the chain's, else to `queue_default`.
    pub(crate) fn links_in(
        &self,
        queue: &RedisQueue,
        batch: Option<Uuid>,
        queue_default: Option<&str>,
    ) -> Result<ChainLinks> {
        let sealer = LinkSealer {
            queue,
            id: Uuid::new_v4(),
            batch,
            default_queue: self.queue.as_deref().or(queue_default),
            delay: self.delay,
        };
        let catch = match &self.catch {
            Some(dispatch) => Some(sealer.catch(dispatch.as_ref())?),
            None => None,
        };
        let mut links = Vec::with_capacity(self.links.len());
        let mut batches = Vec::new();
        let mut steps = self.links.iter().enumerate().peekable();
        while let Some((at, step)) = steps.next() {
            match step {
                Step::Job(dispatch) => links.push(sealer.job(at, dispatch.as_ref())?),
                Step::Batch(inner) => {
                    if at == 0 {
                        return Err(invalid("a chain starts with a job, not a batch"));
                    }
                    if batch.is_some() || inner.has_chains() {
                        return Err(invalid(
                            "a batch that is a link of a chain holds no chains and is in no batch",
                        ));
                    }
                    let then = match steps.peek() {
                        Some((_, Step::Batch(_))) => {
                            return Err(invalid(
                                "a batch in a chain is followed by a job, not a batch",
                            ));
                        }
                        // Without a `then` of its own, the batch's `then` is the chain's next link.
                        Some((next_at, Step::Job(next))) if !inner.has_then() => {
                            let then = sealer.job(*next_at, next.as_ref())?;
                            steps.next();
                            Some(then)
                        }
                        _ => None,
                    };
                    let in_chain = InChain {
                        chain: Some(sealer.id),
                        then,
                        catch: catch.clone(),
                    };
                    let parked = inner.parked(queue, sealer.default_queue, &in_chain)?;
                    links.push(Link::batch_start(parked.id));
                    batches.push(parked);
                }
            }
        }
        let mut links = links.into_iter();
        Ok(ChainLinks {
            first: links.next().expect("a chain has a first link"),
            rest: links.collect(),
            catch,
            batches,
        })
    }
}

/// Seals the links of one chain: each job carries the chain's id (the first one's uuid is
/// it) and its batch, and goes to the chain's queue when it names none.
struct LinkSealer<'q> {
    queue: &'q RedisQueue,
    id: Uuid,
    batch: Option<Uuid>,
    default_queue: Option<&'q str>,
    delay: Option<Delay>,
}

impl LinkSealer<'_> {
    /// The link of the chain's job at position `at`; the first one starts the chain, after
    /// the chain's delay.
    fn job(&self, at: usize, dispatch: &dyn AnyDispatch) -> Result<Link> {
        let placement = Placement {
            uuid: (at == 0).then_some(self.id),
            chain: Some(self.id),
            batch: self.batch,
            queue: self.default_queue.map(str::to_owned),
            delay: if at == 0 { self.delay } else { None },
            ..Placement::default()
        };
        Link::sealed(self.queue, dispatch.envelope_in(&placement)?)
    }

    /// The chain's catch job, which belongs to no chain or batch.
    fn catch(&self, dispatch: &dyn AnyDispatch) -> Result<Link> {
        let placement = Placement {
            queue: self.default_queue.map(str::to_owned),
            ..Placement::default()
        };
        Link::sealed(self.queue, dispatch.envelope_in(&placement)?)
    }
}

/// The error of a chain that cannot be built as asked.
fn invalid(why: &'static str) -> crate::error::Error {
    crate::error::Error::InvalidWorkflow(why)
}

impl Batch {
    /// This batch as a link of a chain (`in_chain`), built and parked under a new id.
    fn parked(
        &self,
        queue: &RedisQueue,
        chain_queue: Option<&str>,
        in_chain: &InChain,
    ) -> Result<ParkedBatch> {
        let id = Uuid::new_v4();
        let (opening, members) = self.parts(queue, id, chain_queue, in_chain)?;
        Ok(ParkedBatch {
            id,
            opening,
            members,
        })
    }

    /// The batch's record and jobs as the batch `id`, built and sealed by `queue`: for a batch
    /// that is a link of a chain, its `then` (its own, else the chain's next link) and `catch`
    /// (its own, else the chain's) as `in_chain` says, and the chain's queue for jobs naming none.
    pub(crate) fn parts(
        &self,
        queue: &RedisQueue,
        id: Uuid,
        chain_queue: Option<&str>,
        in_chain: &InChain,
    ) -> Result<(Opening, Vec<Prepared>)> {
        let default_queue = self.queue.as_deref().or(chain_queue);
        let members = prepare_members(queue, id, default_queue, &self.members)?;
        let mut callbacks: [Option<Link>; 3] = Default::default();
        for (at, (slot, dispatch)) in callbacks.iter_mut().zip(&self.callbacks).enumerate() {
            if let Some(dispatch) = dispatch {
                let placement = Placement {
                    queue: default_queue.map(str::to_owned),
                    // In a chain, the batch's own `then` is the chain's next link.
                    chain: if at == 0 { in_chain.chain } else { None },
                    callback_of: Some(id),
                    ..Placement::default()
                };
                *slot = Some(Link::sealed(queue, dispatch.envelope_in(&placement)?)?);
            }
        }
        if callbacks[0].is_none() {
            callbacks[0] = in_chain.then.clone();
        }
        if callbacks[1].is_none() {
            callbacks[1] = in_chain.catch.clone();
        } else if in_chain.catch.is_some() {
            return Err(invalid(
                "a batch in a chain that has a catch job cannot have a catch job of its own",
            ));
        }
        let opening = Opening {
            name: self.name.clone(),
            allow_failures: self.allow_failures,
            callbacks: Callbacks { links: callbacks },
        };
        Ok((opening, members))
    }
}

/// A batch that is a link of a chain, created with the chain and parked until it is reached.
pub(crate) struct ParkedBatch {
    pub(crate) id: Uuid,
    pub(crate) opening: Opening,
    pub(crate) members: Vec<Prepared>,
}

impl std::fmt::Debug for ParkedBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedBatch").field("id", &self.id).finish()
    }
}

/// A chain's links as built for Redis: the first job, pushed at once; the others, kept in the
/// chain's list; the catch job.
#[derive(Debug)]
pub(crate) struct ChainLinks {
    pub(crate) first: Link,
    pub(crate) rest: Vec<Link>,
    pub(crate) catch: Option<Link>,
    /// The batches that are links of the chain, to create before it starts.
    pub(crate) batches: Vec<ParkedBatch>,
}

/// What a batch that is a link of a chain takes from its chain.
#[derive(Debug, Default)]
pub(crate) struct InChain {
    /// The chain's id, carried by the batch's own `then`, which continues the chain.
    pub(crate) chain: Option<Uuid>,
    /// The chain's next link, pushed as the batch's `then` when it has none of its own.
    pub(crate) then: Option<Link>,
    /// The chain's catch job, pushed as the batch's `catch`.
    pub(crate) catch: Option<Link>,
}

/// The jobs `members` of the batch `id`, built and sealed by `queue`.
pub(crate) fn prepare_members(
    queue: &RedisQueue,
    id: Uuid,
    default_queue: Option<&str>,
    members: &[Member],
) -> Result<Vec<Prepared>> {
    members
        .iter()
        .map(|member| match member {
            Member::Job(dispatch) => {
                let placement = Placement {
                    batch: Some(id),
                    queue: default_queue.map(str::to_owned),
                    ..Placement::default()
                };
                let link = Link::sealed(queue, dispatch.envelope_in(&placement)?)?;
                Ok(Prepared::from(ChainLinks {
                    first: link,
                    rest: Vec::new(),
                    catch: None,
                    batches: Vec::new(),
                }))
            }
            Member::Chain(chain) => Ok(Prepared::from(chain.links_in(
                queue,
                Some(id),
                default_queue,
            )?)),
        })
        .collect()
}

/// A job of a batch as pushed: its first job and, for a chain, the links kept after it.
pub(crate) struct Prepared {
    pub(crate) uuids: Vec<Uuid>,
    pub(crate) links: ChainLinks,
}

impl From<ChainLinks> for Prepared {
    fn from(links: ChainLinks) -> Prepared {
        let uuids = std::iter::once(&links.first)
            .chain(&links.rest)
            .map(|link| link.uuid)
            .collect();
        Prepared { uuids, links }
    }
}

/// What a new batch is created with.
pub(crate) struct Opening {
    pub(crate) name: String,
    pub(crate) allow_failures: bool,
    pub(crate) callbacks: Callbacks,
}
