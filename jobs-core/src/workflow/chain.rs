//! Chains: jobs run one after another, each pushed in the step that acknowledges the one
//! before it.

use std::future::Future;
use uuid::Uuid;

use crate::dispatch::{AnyDispatch, Placement};
use crate::error::Result;
use crate::job::delay::Delay;
use crate::job::Job;
use crate::queue::effects::{ChainDone, StoredLink};
use crate::queue::keys::KeyLayout;
use crate::queue::{scripts, RedisQueue};
use crate::workflow::batch::{InChain, Opening, Prepared};
use crate::workflow::{Batch, Link};
use crate::PendingDispatch;

/// Jobs of any types that run one after another: each link is pushed when the one before it
/// is done, in the same step that acknowledges it. A link that fails for good stops the chain
/// and pushes the catch job, once; a link released to run again keeps its place.
///
/// ```no_run
/// # use jobs_core::{job, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct ImportFile { file: u64 }
/// # #[job] impl Job for ImportFile { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct IndexFile { file: u64 }
/// # #[job] impl Job for IndexFile { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct MailOwner { file: u64 }
/// # #[job] impl Job for MailOwner { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct ReportFailure { file: u64 }
/// # #[job] impl Job for ReportFailure { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # async fn demo() -> Result<(), jobs_core::Error> {
/// use jobs_core::workflow::Chain;
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
    links: Vec<Step>,
    catch: Option<Box<dyn AnyDispatch>>,
    queue: Option<String>,
    delay: Option<Delay>,
    connection: Option<RedisQueue>,
}

/// One link of a chain: a job, or a batch whose jobs all run before the chain goes on.
enum Step {
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
            connection: None,
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
        self.connection = Some(queue.clone());
        self
    }

    /// Pushes the first link and keeps the others, with the catch job, in Redis, in one step.
    /// Returns the chain's id, which is its first job's uuid. A unique or debounced job cannot
    /// be a link ([`Error::NotInWorkflow`](crate::Error::NotInWorkflow)).
    pub fn dispatch(self) -> impl Future<Output = Result<Uuid>> + Send + 'static {
        let prepared = self.handle().and_then(|queue| {
            let links = self.links_in(&queue, None, None)?;
            Ok((queue, links))
        });
        async move {
            let (queue, mut links) = prepared?;
            if let Some(recorder) = queue.recorder() {
                let id = links.first.uuid;
                recorder.chain(&queue, links).await;
                return Ok(id);
            }
            for parked in std::mem::take(&mut links.batches) {
                queue
                    .park_batch(parked.id, parked.opening, &parked.members)
                    .await?;
            }
            queue.start_chain(&links).await?;
            Ok(links.first.uuid)
        }
    }

    fn handle(&self) -> Result<RedisQueue> {
        match &self.connection {
            Some(queue) => Ok(queue.clone()),
            None => RedisQueue::default_handle(),
        }
    }

    /// The chain's links, built and sealed by `queue`, each carrying `batch` when the chain is
    /// a job of a batch; links naming no queue go to the chain's, else to `queue_default`.
    pub(crate) fn links_in(
        &self,
        queue: &RedisQueue,
        batch: Option<Uuid>,
        queue_default: Option<&str>,
    ) -> Result<ChainLinks> {
        let id = Uuid::new_v4();
        let default_queue = self.queue.clone().or(queue_default.map(str::to_owned));
        let catch = match &self.catch {
            Some(dispatch) => {
                let placement = Placement {
                    queue: default_queue.clone(),
                    ..Placement::default()
                };
                Some(queue.link(&dispatch.envelope_in(&placement)?)?)
            }
            None => None,
        };
        let job_link = |at: usize, dispatch: &dyn AnyDispatch| -> Result<Link> {
            let placement = Placement {
                uuid: (at == 0).then_some(id),
                chain: Some(id),
                batch,
                queue: default_queue.clone(),
                delay: if at == 0 { self.delay } else { None },
            };
            queue.link(&dispatch.envelope_in(&placement)?)
        };
        let mut links = Vec::with_capacity(self.links.len());
        let mut batches = Vec::new();
        let mut steps = self.links.iter().enumerate().peekable();
        while let Some((at, step)) = steps.next() {
            match step {
                Step::Job(dispatch) => links.push(job_link(at, dispatch.as_ref())?),
                Step::Batch(inner) => {
                    let invalid = |why| Err(crate::Error::InvalidWorkflow(why));
                    if at == 0 {
                        return invalid("a chain starts with a job, not a batch");
                    }
                    if batch.is_some() || inner.has_chains() {
                        return invalid(
                            "a batch that is a link of a chain holds no chains and is in no batch",
                        );
                    }
                    let batch_id = Uuid::new_v4();
                    // Without a `then` of its own, the batch's `then` is the chain's next link.
                    let mut in_chain = InChain {
                        chain: Some(id),
                        then: None,
                        catch: catch.clone(),
                    };
                    if !inner.has_then() {
                        match steps.peek() {
                            Some((next_at, Step::Job(next))) => {
                                in_chain.then = Some(job_link(*next_at, next.as_ref())?);
                                steps.next();
                            }
                            Some((_, Step::Batch(_))) => {
                                return invalid(
                                    "a batch in a chain is followed by a job, not a batch",
                                );
                            }
                            None => {}
                        }
                    } else if matches!(steps.peek(), Some((_, Step::Batch(_)))) {
                        return invalid("a batch in a chain is followed by a job, not a batch");
                    }
                    let (opening, members) =
                        inner.parts(queue, batch_id, default_queue.as_deref(), &in_chain)?;
                    batches.push(ParkedBatch {
                        id: batch_id,
                        opening,
                        members,
                    });
                    links.push(Link::batch_start(batch_id));
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

impl RedisQueue {
    /// Pushes a chain's first job and keeps the links after it and its catch job: in one step
    /// on one server; on a cluster, the chain is kept first (in its slot) and its first job
    /// pushed after, so a first job never runs without its chain.
    pub(crate) async fn start_chain(&self, links: &ChainLinks) -> Result<()> {
        if self.layout() == KeyLayout::Cluster {
            return self.start_chain_apart(links).await;
        }
        let first = &links.first;
        let id = first.uuid.to_string();
        let first_keys = self.queue_keys(&first.queue);
        let mut call = scripts::CHAIN.key(target(first, &first_keys));
        call.key(&first_keys.notify)
            .key(self.keys().chain(&id))
            .key(self.keys().chain_catch(&id))
            .arg(&first.due)
            .arg(&first.payload)
            .arg(links.catch.as_ref().map_or(String::new(), Link::encode));
        for link in &links.rest {
            call.arg(link.encode());
        }
        self.invoke::<u64>(&call).await?;
        Ok(())
    }

    async fn start_chain_apart(&self, links: &ChainLinks) -> Result<()> {
        self.keep_chain_apart(links).await?;
        self.push_once(&links.first).await?;
        Ok(())
    }

    /// Keeps a chain's links after the first and its catch job, on a cluster (in the chain's
    /// slot), without pushing its first job.
    pub(crate) async fn keep_chain_apart(&self, links: &ChainLinks) -> Result<()> {
        if !links.rest.is_empty() || links.catch.is_some() {
            let id = links.first.uuid.to_string();
            let mut pipe = redis::pipe();
            if !links.rest.is_empty() {
                let rest: Vec<String> = links.rest.iter().map(Link::encode).collect();
                pipe.rpush(self.keys().chain(&id), rest).ignore();
            }
            if let Some(catch) = &links.catch {
                pipe.set(self.keys().chain_catch(&id), catch.encode())
                    .ignore();
            }
            let pipe = &pipe;
            self.call(|mut conn| async move { pipe.query_async::<()>(&mut conn).await })
                .await?;
        }
        Ok(())
    }

    /// `envelope` signed (with a signing key), checked, and made a link.
    pub fn link(&self, envelope: &crate::queue::Envelope) -> Result<Link> {
        Ok(match self.seal(std::slice::from_ref(envelope))? {
            Some(signed) => Link::from_envelope(&signed[0]),
            None => Link::from_envelope(envelope),
        })
    }

    /// The step a link that is done makes its chain take: the next link to push (one the
    /// handler prepended, else the head of the list, else one it appended) and the rest.
    /// `None` when the chain's list holds a link that does not decode: then the chain is left
    /// as it is.
    pub(crate) async fn chain_done(&self, progress: &ChainProgress) -> Result<Option<ChainDone>> {
        let id = progress.id.to_string();
        let list = self.keys().chain(&id);
        let stored = |link: &Link| (link.encode(), link.clone(), self.queue_keys(&link.queue));
        let mut front: Vec<StoredLink> = progress.prepend.iter().rev().map(stored).collect();
        let mut back: Vec<StoredLink> = progress.append.iter().map(stored).collect();
        let (head, next) = if front.is_empty() {
            let list_key = &list;
            let head: Option<String> = self
                .call(|mut conn| async move {
                    redis::cmd("LINDEX")
                        .arg(list_key)
                        .arg(0)
                        .query_async(&mut conn)
                        .await
                })
                .await?;
            match head {
                Some(head) => match Link::decode(&head) {
                    Some(link) if link.starts_batch().is_some() => {
                        // The batch starts in the same call; the chain waits for it.
                        return Ok(Some(ChainDone {
                            catch: self.keys().chain_catch(&id),
                            list,
                            head: Some(head),
                            next: None,
                            front: Vec::new(),
                            back: back.into_iter().map(|(stored, ..)| stored).collect(),
                            starts: link.starts_batch(),
                        }));
                    }
                    Some(link) => {
                        let keys = self.queue_keys(&link.queue);
                        (Some(head.clone()), Some((head, link, keys)))
                    }
                    None => {
                        tracing::warn!(chain = %id, "the chain's next link is not a link; the chain stops here");
                        return Ok(None);
                    }
                },
                None if back.is_empty() => (None, None),
                None => (None, Some(back.remove(0))),
            }
        } else {
            (None, Some(front.remove(0)))
        };
        Ok(Some(ChainDone {
            catch: self.keys().chain_catch(&id),
            list,
            head,
            next,
            front: front.into_iter().map(|(stored, ..)| stored).collect(),
            back: back.into_iter().map(|(stored, ..)| stored).collect(),
            starts: None,
        }))
    }

    /// The uuids of the links the chain `id` keeps, in order.
    pub(crate) async fn chain_rest(&self, id: Uuid) -> Result<Vec<Uuid>> {
        let key = self.keys().chain(&id.to_string());
        let key = &key;
        let stored: Vec<String> = self
            .call(|mut conn| async move {
                redis::cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        Ok(stored
            .iter()
            .filter_map(|link| Link::decode(link).map(|link| link.uuid))
            .collect())
    }

    /// The catch link of the chain `id`, as stored and decoded, if it has one.
    pub(crate) async fn chain_catch(&self, id: Uuid) -> Result<Option<StoredLink>> {
        let key = self.keys().chain_catch(&id.to_string());
        let key = &key;
        let stored: Option<String> = self
            .call(|mut conn| async move { redis::cmd("GET").arg(key).query_async(&mut conn).await })
            .await?;
        Ok(stored.and_then(|stored| {
            let link = Link::decode(&stored)?;
            let keys = self.queue_keys(&link.queue);
            Some((stored, link, keys))
        }))
    }
}

/// The key a link is pushed to: its queue's ready list, or its delayed set when it is due
/// later.
pub(crate) fn target(link: &Link, keys: &crate::queue::keys::QueueKeys) -> String {
    if link.due.is_empty() {
        keys.ready.clone()
    } else {
        keys.delayed.clone()
    }
}
