//! Batches: jobs that run independently, with callback jobs pushed once when they are all done,
//! when the first one fails, and when all have settled.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

use crate::dispatch::{AnyDispatch, Placement};
use crate::error::Result;
use crate::job::Job;
use crate::queue::keys::{KeyLayout, QueueKeys};
use crate::queue::{scripts, RedisQueue};
use crate::workflow::chain::{target, ChainLinks};
use crate::workflow::{Chain, Link};
use crate::PendingDispatch;

/// Jobs of a batch pushed per script call; a larger batch is pushed in parts, and cannot
/// finish before its last part is in.
const PART: usize = 1000;

/// Jobs of any types run independently as one batch, with jobs (not closures) as callbacks:
/// `then` once every job succeeded, `catch` at the first job that fails for good, `finally`
/// once every job has settled. Each job is counted in the script call that settles it, once
/// per uuid however often it runs, so the counts are exact and each callback is pushed once.
///
/// A job that fails for good cancels its batch, unless the batch allows failures; the jobs of
/// a cancelled batch that have not started are settled as done without running (skipped).
///
/// ```no_run
/// # use jobs_core::{job, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct ImportRow { row: u64 }
/// # #[job] impl Job for ImportRow { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct ImportDone { file: u64 }
/// # #[job] impl Job for ImportDone { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct ImportFailed { file: u64 }
/// # #[job] impl Job for ImportFailed { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # async fn demo() -> Result<(), jobs_core::Error> {
/// use jobs_core::workflow::Batch;
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
    name: String,
    members: Vec<Member>,
    callbacks: [Option<Box<dyn AnyDispatch>>; 3],
    allow_failures: bool,
    queue: Option<String>,
    connection: Option<RedisQueue>,
}

/// One job of a batch, or one chain whose links are all jobs of the batch.
enum Member {
    Job(Box<dyn AnyDispatch>),
    Chain(Chain),
}

/// Which callback: the index into [`Batch::callbacks`] and the field of the callbacks hash.
const CALLBACKS: [&str; 3] = ["then", "catch", "finally"];

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
        self.connection = Some(queue.clone());
        self
    }

    /// Creates the batch and pushes its jobs: at most a thousand per script call, each job
    /// counted in the call that pushes it. Returns the batch's id. A unique or debounced job
    /// cannot be in a batch ([`Error::NotInWorkflow`](crate::Error::NotInWorkflow)).
    pub fn dispatch(self) -> impl Future<Output = Result<Uuid>> + Send + 'static {
        let prepared = self.prepare();
        async move {
            let (queue, id, opening, members) = prepared?;
            if let Some(recorder) = queue.recorder() {
                recorder.batch(&queue, id, &opening, &members).await;
                return Ok(id);
            }
            queue
                .send_batch(id, BatchDispatch::Create(Box::new(opening)), &members)
                .await?;
            Ok(id)
        }
    }

    #[allow(clippy::type_complexity)]
    fn prepare(self) -> Result<(RedisQueue, Uuid, Opening, Vec<Prepared>)> {
        let queue = match &self.connection {
            Some(queue) => queue.clone(),
            None => RedisQueue::default_handle()?,
        };
        let id = Uuid::new_v4();
        let (opening, members) = self.parts(&queue, id, None, &InChain::default())?;
        Ok((queue, id, opening, members))
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
                    ..Placement::default()
                };
                *slot = Some(queue.link(&dispatch.envelope_in(&placement)?)?);
            }
        }
        if callbacks[0].is_none() {
            callbacks[0] = in_chain.then.clone();
        }
        if callbacks[1].is_none() {
            callbacks[1] = in_chain.catch.clone();
        } else if in_chain.catch.is_some() {
            return Err(crate::Error::InvalidWorkflow(
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

    /// Whether the batch has a `then` job of its own.
    pub(crate) fn has_then(&self) -> bool {
        self.callbacks[0].is_some()
    }

    /// Whether any of its jobs is a chain.
    pub(crate) fn has_chains(&self) -> bool {
        self.members.iter().any(|m| matches!(m, Member::Chain(_)))
    }
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
fn prepare_members(
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
                let link = queue.link(&dispatch.envelope_in(&placement)?)?;
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
    uuids: Vec<Uuid>,
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

/// Whether a dispatch creates its batch (to start now, or parked until its chain reaches it)
/// or adds to one.
enum BatchDispatch {
    Create(Box<Opening>),
    Park(Box<Opening>),
    Add,
}

/// A batch's callback links (`then`, `catch`, `finally`), from which a script call that may
/// finish the batch takes the keys and due times of the queues they go to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Callbacks {
    pub(crate) links: [Option<Link>; 3],
}

impl Callbacks {
    /// For each callback, the key it is pushed to and its queue's notify (for a missing one,
    /// `placeholder` twice), then the due times.
    pub(crate) fn routes(
        &self,
        queue: &RedisQueue,
        placeholder: &str,
    ) -> (Vec<String>, Vec<String>) {
        let mut keys = Vec::with_capacity(6);
        let mut dues = Vec::with_capacity(3);
        for link in &self.links {
            match link {
                Some(link) => {
                    let queue_keys = queue.queue_keys(&link.queue);
                    keys.push(target(link, &queue_keys));
                    keys.push(queue_keys.notify);
                    dues.push(link.due.clone());
                }
                None => {
                    keys.extend([placeholder.to_owned(), placeholder.to_owned()]);
                    dues.push(String::new());
                }
            }
        }
        (keys, dues)
    }
}

/// The keys of one batch.
#[derive(Debug, Clone)]
pub(crate) struct BatchKeys {
    pub(crate) record: String,
    pub(crate) pending: String,
    pub(crate) failed: String,
    pub(crate) callbacks: String,
}

impl BatchKeys {
    fn all(&self) -> [&str; 4] {
        [&self.record, &self.pending, &self.failed, &self.callbacks]
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

/// Callback routes per batch, read once per batch by a worker: they never change.
#[derive(Debug, Default)]
pub(crate) struct CallbackCache {
    known: Mutex<HashMap<Uuid, Arc<Callbacks>>>,
}

/// Batches whose callback routes a handle keeps at most; past it, it forgets them all.
const CACHED_BATCHES: usize = 1024;

impl RedisQueue {
    /// The keys of the batch `id`.
    pub(crate) fn batch_keys(&self, id: Uuid) -> BatchKeys {
        let id = id.to_string();
        BatchKeys {
            record: self.keys().batch(&id),
            pending: self.keys().batch_pending(&id),
            failed: self.keys().batch_failed(&id),
            callbacks: self.keys().batch_callbacks(&id),
        }
    }

    /// Adds jobs to the batch `id` and pushes them. Returns `false`, pushing nothing, when the
    /// batch is finished, cancelled or gone.
    pub async fn add_to_batch<J: Job>(
        &self,
        id: Uuid,
        jobs: impl IntoIterator<Item = PendingDispatch<J>>,
    ) -> Result<bool> {
        let members: Vec<Member> = jobs
            .into_iter()
            .map(|job| Member::Job(Box::new(job)))
            .collect();
        let members = prepare_members(self, id, None, &members)?;
        if let Some(recorder) = self.recorder() {
            return Ok(recorder.add_to_batch(self, id, &members).await);
        }
        self.send_batch(id, BatchDispatch::Add, &members).await
    }

    /// The callback links of the batch `id`, read once and kept.
    pub(crate) async fn batch_callbacks(&self, id: Uuid) -> Result<Arc<Callbacks>> {
        let cache = self.callback_cache();
        if let Some(known) = cache
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
        {
            return Ok(known.clone());
        }
        let key = self.batch_keys(id).callbacks;
        let key = &key;
        let stored: HashMap<String, String> =
            self.call(|mut conn| async move {
                redis::cmd("HGETALL").arg(key).query_async(&mut conn).await
            })
            .await?;
        let mut callbacks = Callbacks::default();
        for (slot, name) in callbacks.links.iter_mut().zip(CALLBACKS) {
            *slot = stored.get(name).and_then(|link| Link::decode(link));
        }
        let callbacks = Arc::new(callbacks);
        let mut known = cache.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= CACHED_BATCHES {
            known.clear();
        }
        known.insert(id, callbacks.clone());
        Ok(callbacks)
    }

    /// Creates the batch `id`, a link of a chain, with its jobs parked until the chain reaches
    /// it (`batch_start` in `lib/batch.lua`).
    pub(crate) async fn park_batch(
        &self,
        id: Uuid,
        opening: Opening,
        members: &[Prepared],
    ) -> Result<()> {
        self.send_batch(id, BatchDispatch::Park(Box::new(opening)), members)
            .await?;
        Ok(())
    }

    /// The step that starts the batch `id`, which its chain reached, on one server: its keys,
    /// its callbacks' routes and its parked jobs' queues.
    pub(crate) async fn batch_start_step(
        &self,
        id: Uuid,
    ) -> Result<(BatchStep, String, Vec<Link>)> {
        let step = self.batch_step(id).await?;
        let parked = self.keys().batch_parked(&id.to_string());
        let parked_key = &parked;
        let stored: Vec<String> = self
            .call(|mut conn| async move {
                redis::cmd("LRANGE")
                    .arg(parked_key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        let links = stored
            .iter()
            .filter_map(|link| Link::decode(link))
            .collect();
        Ok((step, parked, links))
    }

    /// Adds the batch `id` to the index of batches, on a cluster (where it is in a slot of its
    /// own).
    async fn index_batch(&self, id: Uuid) -> Result<()> {
        let index = self.keys().batches();
        let (index, id) = (&index, id.to_string());
        let id = &id;
        self.call(|mut conn| async move {
            redis::cmd("ZADD")
                .arg(index)
                .arg(chrono::Utc::now().timestamp_millis())
                .arg(id)
                .query_async::<()>(&mut conn)
                .await
        })
        .await
    }

    /// How long a finished batch's record is kept.
    pub(crate) fn batch_retention(&self) -> Duration {
        self.config().batch_retention
    }

    /// Sends a dispatch of `members` to the batch `id` in parts of [`PART`] jobs. Returns
    /// `false` when adding to a batch that is finished, cancelled or gone.
    async fn send_batch(
        &self,
        id: Uuid,
        dispatch: BatchDispatch,
        members: &[Prepared],
    ) -> Result<bool> {
        let keys = self.batch_keys(id);
        let (callbacks, opening) = match &dispatch {
            BatchDispatch::Create(opening) | BatchDispatch::Park(opening) => {
                (Arc::new(opening.callbacks.clone()), Some(&**opening))
            }
            BatchDispatch::Add => (self.batch_callbacks(id).await?, None),
        };
        // On a cluster the batch's calls only count: its jobs, its chains, its callbacks and
        // the index of batches are in other slots, and written after.
        let here = self.layout() == KeyLayout::Standalone;
        let (routes, dues) = match here {
            true => callbacks.routes(self, &keys.record),
            false => (vec![keys.record.clone(); 6], vec![String::new(); 3]),
        };
        let parts: Vec<&[Prepared]> = if members.is_empty() {
            vec![&[]]
        } else {
            members.chunks(PART).collect()
        };
        let id_text = id.to_string();
        for (at, part) in parts.iter().enumerate() {
            let mode = match (at, &dispatch) {
                (0, BatchDispatch::Create(_) | BatchDispatch::Park(_)) => "create",
                (0, BatchDispatch::Add) => "add",
                _ => "more",
            };
            let mut call = scripts::BATCH.prepare_invoke();
            for key in keys.all() {
                call.key(key);
            }
            for key in &routes {
                call.key(key);
            }
            call.key(match here {
                true => self.keys().batches(),
                false => keys.record.clone(),
            });
            call.key(self.keys().batch_parked(&id_text));
            for due in &dues {
                call.arg(due);
            }
            call.arg(self.batch_retention().as_secs().max(1))
                .arg(mode)
                .arg(if at + 1 == parts.len() { "1" } else { "0" })
                .arg(&id_text)
                .arg(opening.map_or("", |o| o.name.as_str()))
                .arg(if opening.is_some_and(|o| o.allow_failures) {
                    "1"
                } else {
                    "0"
                });
            for link in &callbacks.links {
                call.arg(link.as_ref().map_or(String::new(), Link::encode));
            }
            let parking = matches!(dispatch, BatchDispatch::Park(_));
            call.arg(match (here, parking) {
                (true, false) => "push",
                (true, true) => "park",
                (false, false) => "count",
                (false, true) => "park-count",
            });
            for member in part.iter() {
                add_member(self, &mut call, member, &keys.record, here, parking);
            }
            let reply: Vec<String> = self.invoke(&call).await?;
            if reply.first().map(String::as_str) != Some("1") {
                return Ok(false);
            }
            if !here {
                if at == 0 && opening.is_some() {
                    self.index_batch(id).await?;
                }
                for member in part.iter() {
                    match parking {
                        true => self.keep_chain_apart(&member.links).await?,
                        false => self.start_chain(&member.links).await?,
                    }
                }
                for callback in &reply[1..] {
                    if let Some(link) = Link::decode(callback) {
                        self.push_once(&link).await?;
                    }
                }
            }
        }
        Ok(true)
    }
}

/// Adds one job of a batch to a `batch.lua` call: its keys and its arguments. Unless the call
/// pushes it (`here`, on one server), its keys are placeholders in the batch's slot; a job
/// `parking` is given as its link, kept until its batch starts.
fn add_member(
    queue: &RedisQueue,
    call: &mut redis::ScriptInvocation<'_>,
    member: &Prepared,
    placeholder: &str,
    here: bool,
    parking: bool,
) {
    let first = &member.links.first;
    let first_keys: QueueKeys = queue.queue_keys(&first.queue);
    let chained = !member.links.rest.is_empty() || member.links.catch.is_some();
    if here && !parking {
        call.key(target(first, &first_keys)).key(&first_keys.notify);
    } else {
        call.key(placeholder).key(placeholder);
    }
    if chained && here {
        let id = first.uuid.to_string();
        call.key(queue.keys().chain(&id))
            .key(queue.keys().chain_catch(&id));
    } else {
        call.key(placeholder).key(placeholder);
    }
    call.arg(member.uuids.len());
    for uuid in &member.uuids {
        call.arg(uuid.to_string());
    }
    call.arg(&first.due);
    match parking {
        true => call.arg(first.encode()),
        false => call.arg(&first.payload),
    };
    call.arg(member.links.rest.len());
    for link in &member.links.rest {
        call.arg(link.encode());
    }
    call.arg(
        member
            .links
            .catch
            .as_ref()
            .map_or(String::new(), Link::encode),
    );
}

/// What a settling script needs to count a job in its batch: the batch's keys, its callbacks'
/// routes, and how long to keep it once finished.
#[derive(Debug)]
pub(crate) struct BatchStep {
    pub(crate) keys: BatchKeys,
    pub(crate) routes: Vec<String>,
    pub(crate) dues: Vec<String>,
    pub(crate) keep: Duration,
}

impl BatchStep {
    /// The keys of the step, in the order `batch_from` in `lib/batch.lua` reads them.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys
            .all()
            .into_iter()
            .chain(self.routes.iter().map(String::as_str))
    }

    /// The arguments `batch_from` reads.
    pub(crate) fn args(&self) -> impl Iterator<Item = String> + '_ {
        self.dues
            .iter()
            .cloned()
            .chain(std::iter::once(self.keep.as_secs().max(1).to_string()))
    }
}

impl RedisQueue {
    /// The step that counts a job of the batch `id`.
    pub(crate) async fn batch_step(&self, id: Uuid) -> Result<BatchStep> {
        let keys = self.batch_keys(id);
        let callbacks = self.batch_callbacks(id).await?;
        // On a cluster the batch's calls only count: its jobs, its chains, its callbacks and
        // the index of batches are in other slots, and written after.
        let here = self.layout() == KeyLayout::Standalone;
        let (routes, dues) = match here {
            true => callbacks.routes(self, &keys.record),
            false => (vec![keys.record.clone(); 6], vec![String::new(); 3]),
        };
        Ok(BatchStep {
            keys,
            routes,
            dues,
            keep: self.batch_retention(),
        })
    }
}

impl RedisQueue {
    /// Acknowledges finished jobs of the batch `id` taken from `queue`, each given as its
    /// reserved copy and uuid, and counts them in the batch, in one step; returns how many
    /// reservations were still held (only those are counted).
    pub async fn complete_in_batch(
        &self,
        queue: &QueueKeys,
        id: Uuid,
        finished: &[(&str, Uuid)],
    ) -> Result<u64> {
        if finished.is_empty() {
            return Ok(0);
        }
        if self.layout() == KeyLayout::Cluster {
            // Counted in the batch's slot first, the reservations removed last.
            let jobs: Vec<Uuid> = finished.iter().map(|(_, uuid)| *uuid).collect();
            self.batch_done_apart(id, &jobs).await?;
            let reserved: Vec<&str> = finished.iter().map(|(reserved, _)| *reserved).collect();
            return self.delete_many(queue, &reserved).await;
        }
        let step = self.batch_step(id).await?;
        let mut call = scripts::COMPLETE_BATCH.key(&queue.reserved);
        for key in step.keys() {
            call.key(key);
        }
        for arg in step.args() {
            call.arg(arg);
        }
        for (reserved, uuid) in finished {
            call.arg(*reserved).arg(uuid.to_string());
        }
        self.invoke(&call).await
    }
}
