//! The workflow's part in settling a job ([`SettleStep`]): a link of a chain pushes its next
//! link when it is done and its chain's catch job when it fails for good; a job of a batch is
//! counted there, and the batch's callbacks pushed when it is the one that finishes it. On one
//! server these are effects of the settling script call; on a cluster, steps taken in calls of their own.

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::effects::Effects;
use crate::queue::settle::{CountedIn, Ending, SettleStep, Settlement};
use crate::queue::RedisQueue;
use crate::workflow::cluster::joined_links;
use crate::workflow::effects;
use crate::workflow::progress::{BatchProgress, ChainProgress};

/// What settling the job `job` does to its chain and its batch.
#[derive(Debug)]
pub(crate) struct WorkflowStep {
    pub(crate) job: Uuid,
    pub(crate) chain: Option<ChainProgress>,
    pub(crate) batch: Option<BatchProgress>,
}

#[async_trait]
impl SettleStep for WorkflowStep {
    async fn effects(&self, queue: &RedisQueue, ending: Ending, into: &mut Effects) -> Result<()> {
        match ending {
            Ending::Done => self.done_effects(queue, into).await,
            Ending::Failed => self.failed_effects(queue, into).await,
            Ending::Released => Ok(()),
        }
    }

    async fn on_cluster(&self, queue: &RedisQueue, ending: Ending) -> Result<()> {
        let (chain, batch) = (self.chain.as_ref(), self.batch.as_ref());
        match ending {
            Ending::Done => queue.done_on_cluster(self.job, chain, batch).await,
            Ending::Failed => queue.failed_on_cluster(self.job, chain, batch).await,
            Ending::Released => Ok(()),
        }
    }

    fn counted_in(&self) -> Option<CountedIn> {
        match (&self.chain, &self.batch) {
            (None, Some(batch)) if batch.added.is_empty() => Some(CountedIn {
                group: batch.id,
                job: batch.job,
            }),
            _ => None,
        }
    }
}

impl WorkflowStep {
    /// The step as settling takes it; none when the job is neither a link of a chain nor a
    /// job of a batch.
    pub(crate) fn boxed(self) -> Option<Box<dyn SettleStep>> {
        let any = self.chain.is_some() || self.batch.is_some();
        any.then(|| Box::new(self) as Box<dyn SettleStep>)
    }

    /// The effects of a job that is done, for `complete.lua`: its chain's next link (and the
    /// batch it starts, when the next link is one) and its count in its batch.
    async fn done_effects(&self, queue: &RedisQueue, into: &mut Effects) -> Result<()> {
        if let Some(progress) = &self.chain {
            if let Some(step) = queue.chain_done(progress).await? {
                let starts = step.starts;
                effects::chain_done(into, step);
                if let Some(batch) = starts {
                    let (step, parked, links) = queue.batch_start_step(batch).await?;
                    effects::batch_start(into, &step, parked, links);
                }
            }
        }
        if let Some(progress) = &self.batch {
            let joined = joined_links(self.chain.as_ref());
            let added = progress
                .added
                .iter()
                .map(|link| link.stored(queue))
                .collect();
            let step = queue.batch_step(progress.id).await?;
            effects::batch_done(into, &step, progress.job, added, &joined);
        }
        Ok(())
    }

    /// The effects of a job that failed for good, for `fail.lua`: its chain's catch job and its
    /// count in its batch.
    async fn failed_effects(&self, queue: &RedisQueue, into: &mut Effects) -> Result<()> {
        if let Some(progress) = &self.chain {
            let id = progress.id.to_string();
            effects::chain_failed(
                into,
                queue.keys().chain(&id),
                queue.keys().chain_catch(&id),
                queue.chain_catch(progress.id).await?,
                queue.config().failed_max_age,
            );
        }
        if let Some(progress) = &self.batch {
            let leaving = queue
                .leaving_batch(self.chain.as_ref(), Some(progress))
                .await?;
            let step = queue.batch_step(progress.id).await?;
            effects::batch_failed(into, &step, progress.job, &leaving);
        }
        Ok(())
    }
}

impl From<ChainProgress> for Settlement {
    /// Settling a link of a chain that belongs to no batch.
    fn from(chain: ChainProgress) -> Settlement {
        let step = WorkflowStep {
            job: chain.link,
            chain: Some(chain),
            batch: None,
        };
        Settlement {
            holds: Vec::new(),
            steps: smallvec::smallvec![Box::new(step) as Box<dyn SettleStep>],
        }
    }
}

impl From<BatchProgress> for Settlement {
    /// Settling a job of a batch that is no link of a chain.
    fn from(batch: BatchProgress) -> Settlement {
        let step = WorkflowStep {
            job: batch.job,
            chain: None,
            batch: Some(batch),
        };
        Settlement {
            holds: Vec::new(),
            steps: smallvec::smallvec![Box::new(step) as Box<dyn SettleStep>],
        }
    }
}
