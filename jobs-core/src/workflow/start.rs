//! Where a workflow is pushed: a chain's first job with its other links kept (`chain.lua`),
//! and a batch created with its jobs, in parts of a thousand (`batch.lua`), or its jobs parked
//! until its chain reaches it. On a cluster, the parts in other slots follow in calls of their
//! own, each taken once.

use std::future::Future;
use std::sync::Arc;
use uuid::Uuid;

use crate::dispatch::PendingDispatch;
use crate::error::Result;
use crate::job::Job;
use crate::queue::keys::{KeyLayout, QueueKeys};
use crate::queue::{scripts, RedisQueue};
use crate::workflow::builder::{Batch, Chain, Member};
use crate::workflow::link::Link;
use crate::workflow::offline::OfflineWorkflows;
use crate::workflow::plan::{prepare_members, ChainLinks, InChain, Opening, Prepared};
use crate::workflow::record::BatchKeys;

/// Jobs of a batch pushed per script call; a larger batch is pushed in parts, and cannot
/// finish before its last part is in.
const PART: usize = 1000;

impl Chain {
    /// Pushes the first link and keeps the others, with the catch job, in Redis, in one step.
    /// Returns the chain's id, which is its first job's uuid. A unique or debounced job cannot
    /// be a link ([`Error::NotInWorkflow`](crate::error::Error::NotInWorkflow)).
    pub fn dispatch(self) -> impl Future<Output = Result<Uuid>> + Send + 'static {
        let prepared = self.handle().and_then(|queue| {
            let links = self.links_in(&queue, None, None)?;
            Ok((queue, links))
        });
        async move {
            let (queue, mut links) = prepared?;
            if let Some(offline) = queue.offline_part::<OfflineWorkflows>() {
                let id = links.first.uuid;
                offline.0.chain(&queue, links).await;
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
}

impl Batch {
    /// Creates the batch and pushes its jobs: at most a thousand per script call, each job
    /// counted in the call that pushes it. Returns the batch's id. A unique or debounced job
    /// cannot be in a batch ([`Error::NotInWorkflow`](crate::error::Error::NotInWorkflow)).
    pub fn dispatch(self) -> impl Future<Output = Result<Uuid>> + Send + 'static {
        let prepared = self.prepare();
        async move {
            let (queue, id, opening, members) = prepared?;
            if let Some(offline) = queue.offline_part::<OfflineWorkflows>() {
                offline.0.batch(&queue, id, &opening, &members).await;
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
        let queue = self.handle()?;
        let id = Uuid::new_v4();
        let (opening, members) = self.parts(&queue, id, None, &InChain::default())?;
        Ok((queue, id, opening, members))
    }
}

/// Whether a dispatch creates its batch (to start now, or parked until its chain reaches it)
/// or adds to one.
enum BatchDispatch {
    Create(Box<Opening>),
    Park(Box<Opening>),
    Add,
}

impl RedisQueue {
    /// Pushes a chain's first job and keeps the links after it and its catch job: in one step
    /// on one server; on a cluster, the chain is kept first (in its slot) and its first job
    /// pushed after, so a first job never runs without its chain.
    pub(crate) async fn start_chain(&self, links: &ChainLinks) -> Result<()> {
        if self.layout() == KeyLayout::Cluster {
            return self.start_chain_on_cluster(links).await;
        }
        let first = &links.first;
        let id = first.uuid.to_string();
        let first_keys = self.queue_keys(&first.queue);
        let mut call = scripts::CHAIN.key(first.destination(&first_keys));
        call.key(&first_keys.notify)
            .key(self.keys().chain(&id))
            .key(self.keys().chain_catch(&id))
            .arg(&first.due)
            .arg(first.encode())
            .arg(links.catch.as_ref().map_or(String::new(), Link::encode));
        for link in &links.rest {
            call.arg(link.encode());
        }
        self.invoke::<u64>(&call).await?;
        Ok(())
    }

    async fn start_chain_on_cluster(&self, links: &ChainLinks) -> Result<()> {
        self.keep_chain_on_cluster(links).await?;
        self.push_once(&links.first).await?;
        Ok(())
    }

    /// Keeps a chain's links after the first and its catch job, on a cluster (in the chain's
    /// slot), without pushing its first job.
    pub(crate) async fn keep_chain_on_cluster(&self, links: &ChainLinks) -> Result<()> {
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
            self.query_pipe::<()>(&pipe).await?;
        }
        Ok(())
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
        if let Some(offline) = self.offline_part::<OfflineWorkflows>() {
            return Ok(offline.0.add_to_batch(self, id, &members).await);
        }
        self.send_batch(id, BatchDispatch::Add, &members).await
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

    /// Adds the batch `id` to the index of batches and to that of running ones, on a cluster
    /// (where each is in a slot of its own).
    async fn index_batch(&self, id: Uuid) -> Result<()> {
        let created = chrono::Utc::now().timestamp_millis();
        let adds = [self.keys().batches(), self.keys().running_batches()].map(|index| {
            redis::cmd("ZADD")
                .arg(index)
                .arg(created)
                .arg(id.to_string())
                .clone()
        });
        self.query_each(&adds).await
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
        let (routes, dues) = callbacks.routes(self, &keys.record);
        let parts: Vec<&[Prepared]> = if members.is_empty() {
            vec![&[]]
        } else {
            members.chunks(PART).collect()
        };
        let parking = matches!(dispatch, BatchDispatch::Park(_));
        for (at, part) in parts.iter().enumerate() {
            let mode = match (at, &dispatch) {
                (0, BatchDispatch::Create(_) | BatchDispatch::Park(_)) => "create",
                (0, BatchDispatch::Add) => "add",
                _ => "more",
            };
            let mut call = scripts::BATCH.prepare_invoke();
            let header = PartHeader {
                id,
                keys: &keys,
                routes: &routes,
                dues: &dues,
                mode,
                last: at + 1 == parts.len(),
                opening,
                callbacks: &callbacks.links,
                parking,
            };
            self.add_part_header(&mut call, &header);
            for member in part.iter() {
                add_member(self, &mut call, member, &keys.record, parking);
            }
            let reply: Vec<String> = self.invoke(&call).await?;
            if reply.first().map(String::as_str) != Some("1") {
                return Ok(false);
            }
            if self.layout() == KeyLayout::Cluster {
                let created = at == 0 && opening.is_some();
                self.send_part_on_cluster(id, created, part, parking, &reply[1..])
                    .await?;
            }
        }
        Ok(true)
    }

    /// The keys and arguments of a `batch.lua` call before its jobs'.
    fn add_part_header(&self, call: &mut redis::ScriptInvocation<'_>, header: &PartHeader<'_>) {
        let here = self.layout() == KeyLayout::Standalone;
        for key in header.keys.all() {
            call.key(key);
        }
        for key in header.routes {
            call.key(key);
        }
        let (index, running) = match here {
            true => (self.keys().batches(), self.keys().running_batches()),
            false => (header.keys.record.clone(), header.keys.record.clone()),
        };
        call.key(index).key(running);
        call.key(self.keys().batch_parked(&header.id.to_string()));
        for due in header.dues {
            call.arg(due);
        }
        let opening = header.opening;
        call.arg(self.batch_retention().as_secs().max(1))
            .arg(header.mode)
            .arg(if header.last { "1" } else { "0" })
            .arg(header.id.to_string())
            .arg(opening.map_or("", |o| o.name.as_str()))
            .arg(if opening.is_some_and(|o| o.allow_failures) {
                "1"
            } else {
                "0"
            });
        for link in header.callbacks {
            call.arg(link.as_ref().map_or(String::new(), Link::encode));
        }
        call.arg(match (here, header.parking) {
            (true, false) => "push",
            (true, true) => "park",
            (false, false) => "count",
            (false, true) => "park-count",
        });
    }

    /// On a cluster, what a part's call only counted: the batch in the index of batches (when
    /// the part created it), each job's chain kept and its first job pushed (or, parking, only
    /// its chain kept), and the callbacks the part made due, each pushed once.
    async fn send_part_on_cluster(
        &self,
        id: Uuid,
        created: bool,
        part: &[Prepared],
        parking: bool,
        owed_callbacks: &[String],
    ) -> Result<()> {
        if created {
            self.index_batch(id).await?;
        }
        for member in part {
            match parking {
                true => self.keep_chain_on_cluster(&member.links).await?,
                false => self.start_chain(&member.links).await?,
            }
        }
        for callback in owed_callbacks {
            if let Some(link) = Link::decode(callback) {
                self.push_once(&link).await?;
            }
        }
        Ok(())
    }
}

/// What a `batch.lua` call carries before its jobs.
struct PartHeader<'a> {
    id: Uuid,
    keys: &'a BatchKeys,
    routes: &'a [String],
    dues: &'a [String],
    mode: &'a str,
    last: bool,
    opening: Option<&'a Opening>,
    callbacks: &'a [Option<Link>; 3],
    parking: bool,
}

/// Adds one job of a batch to a `batch.lua` call: its keys and its arguments, the job as its
/// link (pushed, or kept until its batch starts when `parking`). Unless the call pushes it
/// (`here`, on one server), its keys are placeholders in the batch's slot.
fn add_member(
    queue: &RedisQueue,
    call: &mut redis::ScriptInvocation<'_>,
    member: &Prepared,
    placeholder: &str,
    parking: bool,
) {
    let here = queue.layout() == KeyLayout::Standalone;
    let first = &member.links.first;
    let first_keys: QueueKeys = queue.queue_keys(&first.queue);
    let chained = !member.links.rest.is_empty() || member.links.catch.is_some();
    if here && !parking {
        call.key(first.destination(&first_keys))
            .key(&first_keys.notify);
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
    call.arg(&first.due).arg(first.encode());
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
