//! The failed-job store: listing, showing, retrying, forgetting and flushing failed jobs.

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Admin, AdminError, Summary, CHUNK};
use crate::error::Result;
use crate::payload::failed::FailedJob;
use crate::queue::scripts;

/// Which failed jobs to list. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedFilter {
    /// Only jobs that failed on this queue.
    pub queue: Option<String>,
    /// Only jobs of this type: the payload's `job` or `displayName`, exactly.
    pub job: Option<String>,
    /// Only jobs whose exception, payload or uuid contains this text, ignoring case.
    pub text: Option<String>,
    /// Only jobs with this tag ([`Job::tags`](crate::Job::tags)), exactly.
    #[serde(default)]
    pub tag: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

impl FailedFilter {
    fn matches(&self, entry: &FailedEntry) -> bool {
        if self
            .queue
            .as_ref()
            .is_some_and(|q| *q != entry.record.queue)
        {
            return false;
        }
        if let Some(job) = &self.job {
            if entry.job != *job && entry.display_name.as_deref() != Some(job.as_str()) {
                return false;
            }
        }
        if self
            .tag
            .as_ref()
            .is_some_and(|tag| !entry.tags.contains(tag))
        {
            return false;
        }
        if let Some(text) = self.text.as_deref().filter(|t| !t.is_empty()) {
            let text = text.to_lowercase();
            let record = &entry.record;
            let found = [&record.exception, &record.payload, &record.uuid]
                .iter()
                .any(|field| field.to_lowercase().contains(&text));
            if !found {
                return false;
            }
        }
        true
    }
}

/// One failed job, as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedEntry {
    /// Its position in the store, oldest first, from 1: what a range selects (the newest job
    /// has the highest number, as Laravel's failed-job ids do). Positions shift when older
    /// records are removed.
    pub position: u64,
    /// The payload's `job` name (`"?"` when the payload has none).
    pub job: String,
    /// The payload's `displayName`, when it has one.
    pub display_name: Option<String>,
    /// The payload's attempts number, when it has one.
    pub attempts: Option<u64>,
    /// The payload's tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The record as stored.
    pub record: FailedJob,
}

/// Failed jobs to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailedSelection {
    /// Every failed job.
    All,
    /// These uuids.
    Uuids(Vec<String>),
    /// Every failed job of this queue.
    Queue(String),
    /// Positions `first..=last` (see [`FailedEntry::position`]).
    Range {
        /// The first position, from 1.
        first: u64,
        /// The last position, included.
        last: u64,
    },
    /// Every failed job the filter matches (its limit applies).
    Matching(FailedFilter),
}

/// What a retry did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryReport {
    /// The jobs pushed back onto their queues, with attempts reset to 0.
    pub retried: Vec<Retried>,
    /// Uuids asked for by name that the store does not have, and records that changed or
    /// went away while the retry ran (they failed again, or were retried or forgotten by
    /// someone else); nothing was done to them.
    pub missing: Vec<String>,
    /// Unique jobs left in the store because another job of theirs holds their unique lock
    /// (one was dispatched since they failed).
    #[serde(default)]
    pub duplicates: Vec<String>,
}

/// One job a retry pushed back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retried {
    /// The job's uuid.
    pub uuid: String,
    /// The queue it went back to.
    pub queue: String,
}

/// A failed-job record with the exact bytes it is stored as.
pub(super) struct Stored {
    pub(super) raw: String,
    pub(super) entry: FailedEntry,
}

impl Admin {
    /// Failed jobs matching `filter`, newest first.
    pub async fn failed(&self, filter: &FailedFilter) -> Result<Vec<FailedEntry>, AdminError> {
        let mut entries: Vec<FailedEntry> = self
            .stored_failed()
            .await?
            .into_iter()
            .rev()
            .map(|stored| stored.entry)
            .filter(|entry| filter.matches(entry))
            .collect();
        if let Some(limit) = filter.limit {
            entries.truncate(limit);
        }
        Ok(entries)
    }

    /// How many failed jobs the store holds.
    pub async fn failed_count(&self) -> Result<u64, AdminError> {
        let mut conn = self.queue.connection();
        Ok(self
            .queue
            .timed(conn.zcard(self.queue.keys().failed_jobs_index()))
            .await?)
    }

    /// One failed job, or [`AdminError::FailedJobNotFound`].
    pub async fn failed_job(&self, uuid: &str) -> Result<FailedEntry, AdminError> {
        let mut conn = self.queue.connection();
        let (raw, rank): (Option<String>, Option<u64>) = self
            .queue
            .timed(
                redis::pipe()
                    .hget(self.queue.keys().failed_jobs(), uuid)
                    .zrank(self.queue.keys().failed_jobs_index(), uuid)
                    .query_async(&mut conn),
            )
            .await?;
        match raw {
            Some(raw) => Ok(stored(uuid, raw, rank.map_or(0, |r| r + 1)).entry),
            None => Err(AdminError::FailedJobNotFound(uuid.to_owned())),
        }
    }

    /// Pushes the selected failed jobs back onto their queues, each with its counters
    /// (attempts, exceptions, requeues) reset to 0 and a wake-up token, and removes their
    /// records. On one server each job moves in one atomic script call, and only if its record
    /// is still the one read; on a Redis Cluster in two calls, each safe to take again, that
    /// push it once per record and then remove the record (a job that failed again meanwhile
    /// keeps its new record). A unique job takes its lock again with the push, and stays in
    /// the store when another job holds it.
    pub async fn retry(&self, selection: &FailedSelection) -> Result<RetryReport, AdminError> {
        let mut report = RetryReport::default();
        if let FailedSelection::Range { first, last } = *selection {
            if first == 0 || first > last {
                return Err(AdminError::InvalidRange { first, last });
            }
        }
        let selected: Vec<Stored> = match selection {
            FailedSelection::Uuids(uuids) => {
                let (found, missing) = self.stored_by_uuid(uuids).await?;
                report.missing = missing;
                found
            }
            FailedSelection::All => self.stored_failed().await?,
            FailedSelection::Queue(queue) => self
                .stored_failed()
                .await?
                .into_iter()
                .filter(|s| s.entry.record.queue == *queue)
                .collect(),
            FailedSelection::Range { first, last } => self
                .stored_failed()
                .await?
                .into_iter()
                .filter(|s| (*first..=*last).contains(&s.entry.position))
                .collect(),
            FailedSelection::Matching(filter) => {
                let mut selected: Vec<Stored> = self
                    .stored_failed()
                    .await?
                    .into_iter()
                    .rev()
                    .filter(|s| filter.matches(&s.entry))
                    .collect();
                if let Some(limit) = filter.limit {
                    selected.truncate(limit);
                }
                selected.reverse();
                selected
            }
        };
        self.push_back(&selected, &mut report).await?;
        Ok(report)
    }

    /// Deletes one failed job's record, or fails with [`AdminError::FailedJobNotFound`].
    pub async fn forget(&self, uuid: &str) -> Result<(), AdminError> {
        match self.forget_many(&[uuid.to_owned()]).await? {
            0 => Err(AdminError::FailedJobNotFound(uuid.to_owned())),
            _ => Ok(()),
        }
    }

    /// Deletes the failed jobs matching `filter` (its limit applies); returns how many.
    pub async fn forget_matching(&self, filter: &FailedFilter) -> Result<u64, AdminError> {
        let uuids: Vec<String> = self
            .failed(filter)
            .await?
            .into_iter()
            .map(|entry| entry.record.uuid)
            .collect();
        self.forget_many(&uuids).await
    }

    /// Deletes failed-job records, both the record and its index entry, in one transaction per
    /// chunk; returns how many records there were.
    async fn forget_many(&self, uuids: &[String]) -> Result<u64, AdminError> {
        let mut forgotten = 0;
        for chunk in uuids.chunks(CHUNK) {
            let mut conn = self.queue.connection();
            let (deleted, _): (u64, u64) = self
                .queue
                .timed(
                    redis::pipe()
                        .atomic()
                        .hdel(self.queue.keys().failed_jobs(), chunk)
                        .zrem(self.queue.keys().failed_jobs_index(), chunk)
                        .query_async(&mut conn),
                )
                .await?;
            forgotten += deleted;
        }
        Ok(forgotten)
    }

    /// Deletes every failed job, or with `older_than` only those that failed longer ago than
    /// that (by Redis's clock); returns how many.
    pub async fn flush_failed(&self, older_than: Option<Duration>) -> Result<u64, AdminError> {
        let mut conn = self.queue.connection();
        let Some(age) = older_than else {
            let (count,): (u64,) = self
                .queue
                .timed(
                    redis::pipe()
                        .atomic()
                        .hlen(self.queue.keys().failed_jobs())
                        .del(&[
                            self.queue.keys().failed_jobs(),
                            self.queue.keys().failed_jobs_index(),
                        ])
                        .ignore()
                        .query_async(&mut conn),
                )
                .await?;
            return Ok(count);
        };
        const PER_CALL: u64 = 1000;
        let mut deleted = 0;
        loop {
            let mut call = scripts::PRUNE_FAILED.key(self.queue.keys().failed_jobs());
            call.key(self.queue.keys().failed_jobs_index())
                .arg(format!("{:.3}", age.as_secs_f64()))
                .arg(PER_CALL);
            let removed: u64 = self.queue.timed(call.invoke_async(&mut conn)).await?;
            deleted += removed;
            if removed < PER_CALL {
                return Ok(deleted);
            }
        }
    }

    /// The records of these uuids (positions are not read: 0), and the uuids the store does
    /// not have.
    async fn stored_by_uuid(
        &self,
        uuids: &[String],
    ) -> Result<(Vec<Stored>, Vec<String>), AdminError> {
        let mut found = Vec::with_capacity(uuids.len());
        let mut missing = Vec::new();
        for (uuid, raw) in uuids.iter().zip(self.raw_records(uuids).await?) {
            match raw {
                Some(raw) => found.push(stored(uuid, raw, 0)),
                None => missing.push(uuid.clone()),
            }
        }
        Ok((found, missing))
    }

    /// Every failed-job record, oldest first, with its position.
    async fn stored_failed(&self) -> Result<Vec<Stored>, AdminError> {
        let mut conn = self.queue.connection();
        let uuids: Vec<String> = self
            .queue
            .timed(conn.zrange(self.queue.keys().failed_jobs_index(), 0, -1))
            .await?;
        let records = self.raw_records(&uuids).await?;
        Ok(uuids
            .iter()
            .zip(records)
            .zip(1..)
            .filter_map(|((uuid, raw), position)| raw.map(|raw| stored(uuid, raw, position)))
            .collect())
    }

    /// The stored records of these uuids, in order (`None` where the store has none), read
    /// with one HMGET per chunk.
    async fn raw_records(&self, uuids: &[String]) -> Result<Vec<Option<String>>, AdminError> {
        let mut conn = self.queue.connection();
        let mut records = Vec::with_capacity(uuids.len());
        for chunk in uuids.chunks(CHUNK) {
            let chunk_records: Vec<Option<String>> = self
                .queue
                .timed(
                    redis::cmd("HMGET")
                        .arg(self.queue.keys().failed_jobs())
                        .arg(chunk)
                        .query_async(&mut conn),
                )
                .await?;
            records.extend(chunk_records);
        }
        Ok(records)
    }
}

/// A stored record with what the listing shows of its payload. A record that does not parse
/// is shown with its text as the payload and the reason as the exception, so it can still be
/// found and forgotten.
fn stored(uuid: &str, raw: String, position: u64) -> Stored {
    let record = serde_json::from_str::<FailedJob>(&raw).unwrap_or_else(|err| FailedJob {
        uuid: uuid.to_owned(),
        connection: String::new(),
        queue: String::new(),
        payload: raw.clone(),
        exception: format!("unreadable failed-job record: {err}"),
        failed_at: String::new(),
    });
    let summary = Summary::of(&record.payload);
    Stored {
        raw,
        entry: FailedEntry {
            position,
            job: summary.job.unwrap_or_else(|| "?".to_owned()),
            display_name: summary.display_name,
            attempts: summary.attempts,
            tags: summary.tags,
            record,
        },
    }
}
