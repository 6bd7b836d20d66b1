//! A batch's state as its record and sets say, for operators and for the jobs that ask, and
//! cancelling one.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::{scripts, RedisQueue, WorkerQueue};

/// A batch as its record and sets say, for operators and for the jobs that ask.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchStatus {
    /// The batch's id.
    pub id: Uuid,
    /// Its name ("" when it has none).
    pub name: String,
    /// Jobs added to it.
    pub total: u64,
    /// Jobs not settled yet (the size of its pending set).
    pub pending: u64,
    /// Jobs that failed for good and were not retried since (the size of its failed set).
    pub failed: u64,
    /// Whether a failure leaves it running.
    pub allow_failures: bool,
    /// When it was created.
    pub created_at: Option<DateTime<Utc>>,
    /// When it was cancelled.
    pub cancelled_at: Option<DateTime<Utc>>,
    /// When its last job settled.
    pub finished_at: Option<DateTime<Utc>>,
}

impl BatchStatus {
    /// Jobs settled: succeeded, failed, or skipped because the batch was cancelled.
    pub fn processed(&self) -> u64 {
        self.total.saturating_sub(self.pending)
    }

    /// Jobs settled as a share of all, in percent, rounded down (100 for an empty batch).
    pub fn progress(&self) -> u8 {
        (self.processed() * 100)
            .checked_div(self.total)
            .map_or(100, |p| p.min(100) as u8)
    }

    /// Whether every job has settled.
    pub fn finished(&self) -> bool {
        self.finished_at.is_some()
    }

    /// Whether it was cancelled.
    pub fn cancelled(&self) -> bool {
        self.cancelled_at.is_some()
    }
}

impl RedisQueue {
    /// The batch `id` as its record and sets say, or `None` when there is no such batch (or it
    /// was pruned).
    pub async fn batch(&self, id: Uuid) -> Result<Option<BatchStatus>> {
        Ok(self.batch_statuses(&[id]).await?.pop().flatten())
    }

    /// The batches `ids` as their records and sets say, in order (`None` for one whose record
    /// is gone), in one round trip: each one's record, and the sizes of its pending and failed
    /// sets, which are its counts.
    pub(crate) async fn batch_statuses(&self, ids: &[Uuid]) -> Result<Vec<Option<BatchStatus>>> {
        let reads: Vec<redis::Cmd> = ids
            .iter()
            .flat_map(|&id| {
                let keys = self.batch_keys(id);
                [
                    redis::cmd("HGETALL").arg(keys.record).clone(),
                    redis::cmd("SCARD").arg(keys.pending).clone(),
                    redis::cmd("ZCARD").arg(keys.failed).clone(),
                ]
            })
            .collect();
        let replies: Vec<(HashMap<String, String>, u64, u64)> = self.query_each(&reads).await?;
        Ok(ids
            .iter()
            .zip(replies)
            .map(|(&id, (record, pending, failed))| {
                BatchStatus::from_record(id, &record, pending, failed)
            })
            .collect())
    }

    /// Cancels the batch `id`: its jobs that have not started are skipped. Returns `false`
    /// when there is no such batch, or it was already cancelled.
    pub async fn cancel_batch(&self, id: Uuid) -> Result<bool> {
        let record = self.batch_keys(id).record;
        let mut call = scripts::CANCEL_BATCH.key(&record);
        call.arg(0);
        let cancelled: u64 = self.invoke(&call).await?;
        Ok(cancelled == 1)
    }
}

impl WorkerQueue<'_> {
    /// Whether the batch `id` was cancelled.
    pub async fn batch_cancelled(&self, id: Uuid) -> Result<bool> {
        let handle = self.handle();
        let record = handle.batch_keys(id).record;
        let cancelled: Option<String> = handle
            .query(redis::cmd("HGET").arg(record).arg("cancelled_at"))
            .await?;
        Ok(cancelled.is_some())
    }
}

impl BatchStatus {
    /// A batch's status from its record's fields (`HGETALL jobs:batch:<id>`) and the sizes of
    /// its pending and failed sets; `None` for a record that does not exist.
    fn from_record(
        id: Uuid,
        fields: &HashMap<String, String>,
        pending: u64,
        failed: u64,
    ) -> Option<BatchStatus> {
        let number = |name: &str| fields.get(name).and_then(|v| v.parse::<i64>().ok());
        let time = |name: &str| number(name).and_then(DateTime::from_timestamp_millis);
        let count = |name: &str| number(name).map_or(0, |n| n.max(0) as u64);
        fields.get("created_at")?;
        Some(BatchStatus {
            id,
            name: fields.get("name").cloned().unwrap_or_default(),
            total: count("total"),
            pending,
            failed,
            allow_failures: fields.get("allow_failures").is_some_and(|v| v == "1"),
            created_at: time("created_at"),
            cancelled_at: time("cancelled_at"),
            finished_at: time("finished_at"),
        })
    }
}
