//! Workflow steps on a Redis Cluster, where a chain's or a batch's keys and the queues its
//! jobs go to are in different slots, so no script can take a step and push what it causes in
//! one call. Each step is recorded under the uuid of the job that caused it (`chain_step.lua`,
//! `batch_settle.lua`), so taking it again returns the same jobs to push; each push is guarded
//! by the pushed job's uuid (`push_once.lua`); and the settled job's reservation is removed
//! last. A worker that dies between two calls leaves a job that runs again and takes the same
//! steps, which push nothing twice.

use std::time::Duration;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::{scripts, RedisQueue};
use crate::workflow::link::Link;
use crate::workflow::progress::{BatchProgress, ChainProgress};

/// How long a push guard and a recorded step last: far longer than a job can wait to be run
/// again after a crash.
const GUARD: Duration = Duration::from_secs(86_400);

impl RedisQueue {
    /// Pushes `link` onto its queue unless it was pushed already; returns whether it was now.
    pub(crate) async fn push_once(&self, link: &Link) -> Result<bool> {
        let pushed: u64 = self.invoke(&self.push_once_call(link, GUARD)).await?;
        Ok(pushed == 1)
    }

    /// The call that pushes `link` unless a job of its uuid was pushed within `guard`.
    pub(crate) fn push_once_call(
        &self,
        link: &Link,
        guard: Duration,
    ) -> redis::ScriptInvocation<'static> {
        let keys = self.queue_keys(&link.queue);
        let mut call = scripts::PUSH_ONCE.key(link.destination(&keys));
        call.key(&keys.notify)
            .key(self.keys().pushed(&link.queue, &link.uuid.to_string()))
            .arg(&link.due)
            .arg(link.encode())
            .arg(guard.as_secs());
        call
    }

    /// The call that pushes `link`, a unique job, unless a job of its uuid was pushed within
    /// `guard`, taking its lock `lock` (the key under the queue) for `lasts_ms` in the same
    /// step (`push_unique_once.lua`): the outbox relay's push of a unique job.
    #[cfg(feature = "postgres")]
    pub(crate) fn push_unique_once_call(
        &self,
        link: &Link,
        lock: &str,
        lasts_ms: i64,
        guard: Duration,
    ) -> redis::ScriptInvocation<'static> {
        let uuid = link.uuid.to_string();
        let push = crate::queue::UniquePush {
            queue: &link.queue,
            group: link.group.as_deref(),
            lock,
            uuid: &uuid,
            lasts_ms,
            payload: &link.payload,
            due: &link.due,
        };
        let mut call = self.unique_push_call(&scripts::PUSH_UNIQUE_ONCE, push);
        call.key(self.keys().pushed(&link.queue, &uuid))
            .arg(guard.as_secs())
            .arg(link.group.as_deref().unwrap_or(""));
        call
    }

    /// Pushes the links stored as `stored` (as they are kept in Redis), each once.
    async fn push_stored(&self, stored: &[String]) -> Result<()> {
        for stored in stored {
            match Link::decode(stored) {
                Some(link) => {
                    self.push_once(&link).await?;
                }
                None => tracing::warn!("a workflow owes a job that is not a link; it is dropped"),
            }
        }
        Ok(())
    }

    /// Takes the workflow steps of the job `job` that is done, on a cluster: its chain's next
    /// link and its batch's count, each recorded under its uuid, then pushes what they owe.
    pub(crate) async fn done_on_cluster(
        &self,
        job: Uuid,
        chain: Option<&ChainProgress>,
        batch: Option<&BatchProgress>,
    ) -> Result<()> {
        let mut owed = Vec::new();
        if let Some(chain) = chain {
            let mut prepend: Vec<String> = chain.prepend.iter().rev().map(Link::encode).collect();
            let next = if prepend.is_empty() {
                String::new()
            } else {
                prepend.remove(0)
            };
            let mut call = self.chain_step(chain.id, "done", job);
            call.arg(next).arg(prepend.len());
            for link in &prepend {
                call.arg(link);
            }
            call.arg(chain.append.len());
            for link in &chain.append {
                call.arg(link.encode());
            }
            let next: String = self.invoke(&call).await?;
            match Link::decode(&next).and_then(|link| link.starts_batch()) {
                // The chain reached a batch: it starts, recorded under this link's uuid too.
                Some(batch) => {
                    let entry = [job.to_string()];
                    owed.extend(self.batch_settle(batch, "start", &entry).await?);
                }
                None if !next.is_empty() => owed.push(next),
                None => {}
            }
        }
        if let Some(batch) = batch {
            let joined = joined_links(chain);
            let mut entry = vec![job.to_string(), batch.added.len().to_string()];
            for link in &batch.added {
                entry.extend([link.uuid.to_string(), link.encode()]);
            }
            entry.push(joined.len().to_string());
            entry.extend(joined.iter().map(Uuid::to_string));
            owed.extend(self.batch_settle(batch.id, "done", &entry).await?);
        }
        self.push_stored(&owed).await
    }

    /// Takes the workflow steps of the job `job` that failed for good, on a cluster: its
    /// chain's catch job and its batch's count, each recorded under its uuid, then pushes what
    /// they owe.
    pub(crate) async fn failed_on_cluster(
        &self,
        job: Uuid,
        chain: Option<&ChainProgress>,
        batch: Option<&BatchProgress>,
    ) -> Result<()> {
        let mut owed = Vec::new();
        let leaving = self.leaving_batch(chain, batch).await?;
        if let Some(chain) = chain {
            let mut call = self.chain_step(chain.id, "failed", job);
            call.arg(self.config().failed_max_age.as_secs().max(1));
            let catch: String = self.invoke(&call).await?;
            if !catch.is_empty() {
                owed.push(catch);
            }
        }
        if let Some(batch) = batch {
            let mut entry = vec![job.to_string(), leaving.len().to_string()];
            entry.extend(leaving.iter().map(Uuid::to_string));
            owed.extend(self.batch_settle(batch.id, "failed", &entry).await?);
        }
        self.push_stored(&owed).await
    }

    /// A `chain_step.lua` call of the chain `id`, for the job `job` that settled as `mode`
    /// (`done` or `failed`), before the mode's own arguments.
    fn chain_step(&self, id: Uuid, mode: &str, job: Uuid) -> redis::ScriptInvocation<'static> {
        let id = id.to_string();
        let mut call = scripts::CHAIN_STEP.key(self.keys().chain(&id));
        call.key(self.keys().chain_catch(&id))
            .key(self.keys().chain_owed(&id))
            .arg(mode)
            .arg(job.to_string());
        call
    }

    /// Counts jobs of the batch `id` done, on a cluster, and pushes the callbacks that fell due.
    pub(crate) async fn batch_done_on_cluster(&self, id: Uuid, jobs: &[Uuid]) -> Result<()> {
        let mut entries = Vec::with_capacity(jobs.len() * 3);
        for job in jobs {
            entries.extend([job.to_string(), "0".to_owned(), "0".to_owned()]);
        }
        let owed = self.batch_settle(id, "done", &entries).await?;
        self.push_stored(&owed).await
    }

    /// Calls `batch_settle.lua` for the batch `id`; returns the links owed.
    async fn batch_settle(&self, id: Uuid, mode: &str, entries: &[String]) -> Result<Vec<String>> {
        let keys = self.batch_keys(id);
        let mut call = scripts::BATCH_SETTLE.key(&keys.record);
        call.key(&keys.pending)
            .key(&keys.failed)
            .key(&keys.callbacks)
            .key(self.keys().batch_owed(&id.to_string()))
            .key(self.keys().batch_parked(&id.to_string()))
            .arg(self.batch_retention().as_secs().max(1))
            .arg(mode);
        for entry in entries {
            call.arg(entry);
        }
        self.invoke(&call).await
    }
}

/// The uuids of the links a job of a batch added to its chain: they join its batch, and its
/// chain pushes them.
pub(crate) fn joined_links(chain: Option<&ChainProgress>) -> Vec<Uuid> {
    chain
        .iter()
        .flat_map(|chain| {
            chain
                .prepend
                .iter()
                .chain(&chain.append)
                .map(|link| link.uuid)
        })
        .collect()
}

impl RedisQueue {
    /// The links after a failed link of a batch's chain: they will not run, and leave the
    /// batch.
    pub(crate) async fn leaving_batch(
        &self,
        chain: Option<&ChainProgress>,
        batch: Option<&BatchProgress>,
    ) -> Result<Vec<Uuid>> {
        match (chain, batch) {
            (Some(chain), Some(_)) => self.chain_rest(chain.id).await,
            _ => Ok(Vec::new()),
        }
    }
}
