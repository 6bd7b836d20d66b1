//! Batches: listing them with their progress, showing one with its failed jobs, cancelling
//! one, retrying its failed jobs, and pruning finished ones.

use chrono::Utc;
use serde::Serialize;
use uuid::Uuid;

use super::{Admin, AdminError, FailedSelection, RetryReport};
use crate::workflow::BatchStatus;

/// Batch ids read from the index per call while listing or pruning.
const PAGE: isize = 500;

/// A batch with the uuids of its failed jobs, oldest failure first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchDetail {
    /// The batch as its record says.
    #[serde(flatten)]
    pub status: BatchStatus,
    /// The uuids of its jobs that failed for good (and were not retried since).
    pub failed_jobs: Vec<String>,
}

/// The batches not finished yet, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PendingBatches {
    /// Batches not finished.
    pub batches: u64,
    /// Jobs pending in them.
    pub jobs: u64,
}

impl Admin {
    /// Batches, newest first, at most `limit`. A batch whose record expired or was pruned is
    /// left out (and dropped from the index).
    pub async fn batches(&self, limit: usize) -> Result<Vec<BatchStatus>, AdminError> {
        let index = self.queue.keys().batches();
        let mut conn = self.queue.connection();
        let mut found = Vec::new();
        let mut start = 0;
        while found.len() < limit {
            let ids = self.index_page(true, start).await?;
            if ids.is_empty() {
                break;
            }
            start += PAGE;
            for id in ids {
                match self.batch_by_text(&id).await? {
                    Some(status) => found.push(status),
                    None => {
                        let _: () = self
                            .queue
                            .timed(redis::AsyncCommands::zrem(&mut conn, &index, &id))
                            .await?;
                        start -= 1;
                    }
                }
                if found.len() == limit {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The batch `id` with its failed jobs; [`AdminError::BatchNotFound`] when there is no
    /// such batch.
    pub async fn batch(&self, id: &str) -> Result<BatchDetail, AdminError> {
        let status = self
            .batch_by_text(id)
            .await?
            .ok_or_else(|| AdminError::BatchNotFound(id.to_owned()))?;
        let failed_key = self.queue.keys().batch_failed(id);
        let mut conn = self.queue.connection();
        let failed_jobs: Vec<String> = self
            .queue
            .timed(redis::AsyncCommands::zrange(&mut conn, failed_key, 0, -1))
            .await?;
        Ok(BatchDetail {
            status,
            failed_jobs,
        })
    }

    /// Cancels the batch `id`: its jobs that have not started are skipped. Returns `false`
    /// when it was cancelled already; [`AdminError::BatchNotFound`] when there is no such
    /// batch.
    pub async fn cancel_batch(&self, id: &str) -> Result<bool, AdminError> {
        let uuid = parse_id(id)?;
        if self.queue.batch(uuid).await?.is_none() {
            return Err(AdminError::BatchNotFound(id.to_owned()));
        }
        Ok(self.queue.cancel_batch(uuid).await?)
    }

    /// Pushes the failed jobs of the batch `id` back onto their queues, as `jobsctl retry`
    /// does; each is counted in the batch again when it settles.
    pub async fn retry_batch(&self, id: &str) -> Result<RetryReport, AdminError> {
        let detail = self.batch(id).await?;
        if detail.failed_jobs.is_empty() {
            return Ok(RetryReport::default());
        }
        self.retry(&FailedSelection::Uuids(detail.failed_jobs))
            .await
    }

    /// Deletes the batches that finished more than `hours` hours ago, and their keys; returns
    /// their ids.
    pub async fn prune_batches(&self, hours: u64) -> Result<Vec<String>, AdminError> {
        let cutoff = Utc::now() - chrono::Duration::hours(hours.min(1_000_000) as i64);
        let index = self.queue.keys().batches();
        let mut pruned = Vec::new();
        let mut start = 0;
        loop {
            let ids = self.index_page(false, start).await?;
            if ids.is_empty() {
                return Ok(pruned);
            }
            start += PAGE;
            for id in ids {
                let status = self.batch_by_text(&id).await?;
                let old = match &status {
                    Some(status) => status.finished_at.is_some_and(|at| at < cutoff),
                    None => true,
                };
                if !old {
                    continue;
                }
                let removals = [
                    redis::cmd("DEL")
                        .arg(&self.queue.keys().batch_family(&id))
                        .clone(),
                    redis::cmd("ZREM").arg(&index).arg(&id).clone(),
                ];
                let _: () = self.queue.query_each(&removals).await?;
                start -= 1;
                if status.is_some() {
                    pruned.push(id);
                }
            }
        }
    }

    /// The batches not finished yet, and the jobs pending in them: one pipelined read of every
    /// batch's counters per page of the index.
    pub async fn pending_batches(&self) -> Result<PendingBatches, AdminError> {
        let mut pending = PendingBatches::default();
        let mut start = 0;
        loop {
            let ids = self.index_page(false, start).await?;
            if ids.is_empty() {
                return Ok(pending);
            }
            start += PAGE;
            let reads: Vec<redis::Cmd> = ids
                .iter()
                .map(|id| {
                    redis::cmd("HMGET")
                        .arg(self.queue.keys().batch(id))
                        .arg(&["created_at", "pending", "finished_at"][..])
                        .clone()
                })
                .collect();
            let states: Vec<(Option<String>, Option<u64>, Option<String>)> =
                self.queue.query_each(&reads).await?;
            for (created, jobs, finished) in states {
                if created.is_some() && finished.is_none() {
                    pending.batches += 1;
                    pending.jobs += jobs.unwrap_or(0);
                }
            }
        }
    }

    /// One page of batch ids from the index, from position `start`, newest or oldest first.
    async fn index_page(
        &self,
        newest_first: bool,
        start: isize,
    ) -> Result<Vec<String>, AdminError> {
        let index = self.queue.keys().batches();
        let mut conn = self.queue.connection();
        let (first, last) = (start, start + PAGE - 1);
        let page = match newest_first {
            true => {
                self.queue
                    .timed(redis::AsyncCommands::zrevrange(
                        &mut conn, &index, first, last,
                    ))
                    .await?
            }
            false => {
                self.queue
                    .timed(redis::AsyncCommands::zrange(&mut conn, &index, first, last))
                    .await?
            }
        };
        Ok(page)
    }

    async fn batch_by_text(&self, id: &str) -> Result<Option<BatchStatus>, AdminError> {
        match id.parse::<Uuid>() {
            Ok(uuid) => Ok(self.queue.batch(uuid).await?),
            Err(_) => Ok(None),
        }
    }
}

fn parse_id(id: &str) -> Result<Uuid, AdminError> {
    id.parse()
        .map_err(|_| AdminError::BatchNotFound(id.to_owned()))
}
