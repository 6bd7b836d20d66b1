//! The failed-job store: listing, showing, retrying, forgetting and flushing failed jobs.

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::cursor::Cursor;
use super::{Admin, AdminError, Summary, CHUNK};
use crate::error::Result;
use crate::payload::failed::FailedJob;
use crate::queue::scripts;

/// Which failed jobs to list, retry or forget. Empty fields match everything. The store is
/// searched on the Redis side, in bounded steps ([`Admin::failed_page`]).
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
    /// Only jobs that failed at or after this time.
    #[serde(default)]
    pub since: Option<DateTime<Utc>>,
    /// Only jobs that failed at or before this time.
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// At most this many, newest first. In [`Admin::failed_page`], the page's size (default
    /// [`FAILED_PAGE`], at most [`FAILED_PAGE_MAX`]).
    pub limit: Option<usize>,
}

/// The size of a page of failed jobs when the filter sets none.
pub const FAILED_PAGE: usize = 50;

/// The largest page of failed jobs.
pub const FAILED_PAGE_MAX: usize = 1000;

/// Records one script call reads at most, and how long it runs at most: a step of a search
/// of a store of any size holds Redis this long at most.
const STEP_READS: usize = 2000;
const STEP_MILLIS: u64 = 5;

/// One page of failed jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedPage {
    /// The jobs of this page that match the filter.
    pub entries: Vec<FailedEntry>,
    /// Where the next page starts (pass it as `after`), or `None` when the search reached the
    /// end of the store. A search that ran out of its time for one request returns fewer
    /// entries than asked, and a cursor.
    pub next: Option<String>,
    /// Records in the store.
    pub total: u64,
    /// Records read to fill this page.
    pub scanned: u64,
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
    /// Failed jobs matching `filter`, newest first, at most its `limit` (every match without
    /// one), found in bounded search steps.
    pub async fn failed(&self, filter: &FailedFilter) -> Result<Vec<FailedEntry>, AdminError> {
        let mut entries = Vec::new();
        let mut matching = Matching::new(filter.clone());
        while let Some(chunk) = matching.next_chunk(self).await? {
            entries.extend(chunk.into_iter().map(|stored| stored.entry));
        }
        Ok(entries)
    }

    /// One page of the failed jobs matching `filter`, newest first, after the cursor `after` (a
    /// page's [`FailedPage::next`]; `None`: from the newest). The search runs on the Redis side, in
    /// script calls that each read at most a few thousand records for a few milliseconds; a page
    /// stops searching after its budget ([`Admin::with_page_budget`], 30 ms unless set) and returns
    /// what it found with a cursor, so every request answers promptly however large the store and
    /// however rare the matches. A cursor stays valid while records are added and removed.
    pub async fn failed_page(
        &self,
        filter: &FailedFilter,
        after: Option<&str>,
    ) -> Result<FailedPage, AdminError> {
        let wanted = filter
            .limit
            .unwrap_or(FAILED_PAGE)
            .clamp(1, FAILED_PAGE_MAX);
        let mut cursor = after.map(Cursor::parse).transpose()?;
        let started = tokio::time::Instant::now();
        let mut page = FailedPage {
            entries: Vec::new(),
            next: None,
            total: 0,
            scanned: 0,
        };
        loop {
            let step = self
                .failed_step(filter, cursor.as_ref(), wanted - page.entries.len())
                .await?;
            page.total = step.total;
            page.scanned += step.read;
            page.entries
                .extend(step.stored.into_iter().map(|stored| stored.entry));
            cursor = step.last.or(cursor);
            if step.done {
                return Ok(page);
            }
            if page.entries.len() >= wanted || started.elapsed() >= self.page_budget {
                page.next = cursor.map(|c| c.to_string());
                return Ok(page);
            }
        }
    }

    /// One script call of a search: at most `wanted` matches after `cursor`.
    async fn failed_step(
        &self,
        filter: &FailedFilter,
        cursor: Option<&Cursor>,
        wanted: usize,
    ) -> Result<Step, AdminError> {
        let keys = self.queue.keys();
        let bound = |time: Option<DateTime<Utc>>, none: &str| {
            time.map_or(none.to_owned(), |t| {
                format!("{}.{:06}", t.timestamp(), t.timestamp_subsec_micros())
            })
        };
        let text = filter.text.as_deref().unwrap_or("").to_lowercase();
        let mut call = scripts::FAILED_PAGE.key(keys.failed_jobs());
        call.key(keys.failed_jobs_index())
            .arg(cursor.map_or("", |c| c.score.as_str()))
            .arg(cursor.map_or("", |c| c.member.as_str()))
            .arg(bound(filter.since, "-inf"))
            .arg(bound(filter.until, "+inf"))
            .arg(wanted)
            .arg(STEP_READS)
            .arg(STEP_MILLIS)
            .arg(filter.queue.as_deref().unwrap_or(""))
            .arg(filter.job.as_deref().unwrap_or(""))
            .arg(filter.tag.as_deref().unwrap_or(""))
            .arg(text);
        let reply: Vec<redis::Value> = self.queue.invoke(&call).await?;
        Step::of(reply).ok_or_else(|| {
            AdminError::Queue(crate::error::Error::from(redis::RedisError::from((
                redis::ErrorKind::Parse,
                "failed_page.lua answered in an unexpected shape",
            ))))
        })
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
    /// push it once per failure and then remove the record (a job that failed again meanwhile
    /// keeps its new record). Selections by filter, queue or `All` go through the store in
    /// chunks of 500 found by bounded search steps, so no Redis call grows with the store. A unique job takes its lock again with the push, and stays in
    /// the store when another job holds it.
    pub async fn retry(&self, selection: &FailedSelection) -> Result<RetryReport, AdminError> {
        let mut report = RetryReport::default();
        if let FailedSelection::Range { first, last } = *selection {
            if first == 0 || first > last {
                return Err(AdminError::InvalidRange { first, last });
            }
        }
        let filter = match selection {
            FailedSelection::Uuids(uuids) => {
                for chunk in uuids.chunks(CHUNK) {
                    let (found, missing) = self.stored_by_uuid(chunk).await?;
                    report.missing.extend(missing);
                    self.push_back(&found, &mut report).await?;
                }
                return Ok(report);
            }
            FailedSelection::Range { first, last } => {
                for chunk in self.positions(*first, *last).await? {
                    let (found, missing) = self.stored_by_uuid(&chunk).await?;
                    report.missing.extend(missing);
                    self.push_back(&found, &mut report).await?;
                }
                return Ok(report);
            }
            FailedSelection::All => FailedFilter::default(),
            FailedSelection::Queue(queue) => FailedFilter {
                queue: Some(queue.clone()),
                ..FailedFilter::default()
            },
            FailedSelection::Matching(filter) => filter.clone(),
        };
        let mut matching = Matching::new(filter);
        while let Some(chunk) = matching.next_chunk(self).await? {
            self.push_back(&chunk, &mut report).await?;
        }
        Ok(report)
    }

    /// Deletes one failed job's record, or fails with [`AdminError::FailedJobNotFound`].
    pub async fn forget(&self, uuid: &str) -> Result<(), AdminError> {
        match self.forget_many(&[uuid.to_owned()]).await? {
            0 => Err(AdminError::FailedJobNotFound(uuid.to_owned())),
            _ => Ok(()),
        }
    }

    /// Deletes the failed jobs matching `filter` (its limit applies), in chunks found by
    /// bounded search steps; returns how many.
    pub async fn forget_matching(&self, filter: &FailedFilter) -> Result<u64, AdminError> {
        let mut forgotten = 0;
        let mut matching = Matching::new(filter.clone());
        while let Some(chunk) = matching.next_chunk(self).await? {
            let uuids: Vec<String> = chunk.into_iter().map(|s| s.entry.record.uuid).collect();
            forgotten += self.forget_many(&uuids).await?;
        }
        Ok(forgotten)
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
        for (uuid, raw) in uuids.iter().zip(self.queue.failed_raw(uuids).await?) {
            match raw {
                Some(raw) => found.push(stored(uuid, raw, 0)),
                None => missing.push(uuid.clone()),
            }
        }
        Ok((found, missing))
    }

    /// The uuids at positions `first..=last` (1 is the oldest), in chunks.
    async fn positions(&self, first: u64, last: u64) -> Result<Vec<Vec<String>>, AdminError> {
        let mut conn = self.queue.connection();
        let mut chunks = Vec::new();
        let mut from = first - 1;
        while from < last {
            let to = (from + CHUNK as u64).min(last) - 1;
            let uuids: Vec<String> = self
                .queue
                .timed(conn.zrange(
                    self.queue.keys().failed_jobs_index(),
                    from as isize,
                    to as isize,
                ))
                .await?;
            if uuids.is_empty() {
                break;
            }
            chunks.push(uuids);
            from = to + 1;
        }
        Ok(chunks)
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

/// What one call of `failed_page.lua` found.
struct Step {
    total: u64,
    read: u64,
    last: Option<Cursor>,
    done: bool,
    stored: Vec<Stored>,
}

impl Step {
    /// Reads the script's reply: the store's size, the records read, the last one's score and
    /// uuid, whether the end was reached, then rank, uuid and record of each match.
    fn of(reply: Vec<redis::Value>) -> Option<Step> {
        let mut fields = reply.into_iter();
        let next_text = |fields: &mut std::vec::IntoIter<redis::Value>| {
            redis::from_redis_value::<String>(fields.next()?).ok()
        };
        let next_number = |fields: &mut std::vec::IntoIter<redis::Value>| {
            redis::from_redis_value::<u64>(fields.next()?).ok()
        };
        let total = next_number(&mut fields)?;
        let read = next_number(&mut fields)?;
        let score = next_text(&mut fields)?;
        let uuid = next_text(&mut fields)?;
        let done = next_number(&mut fields)? == 1;
        let last = (!uuid.is_empty()).then_some(Cursor {
            score,
            member: uuid,
        });
        let mut stored = Vec::new();
        while let Some(rank) = next_number(&mut fields) {
            let uuid = next_text(&mut fields)?;
            let raw = next_text(&mut fields)?;
            stored.push(self::stored(&uuid, raw, total.saturating_sub(rank)));
        }
        Some(Step {
            total,
            read,
            last,
            done,
            stored,
        })
    }
}

/// The records matching a filter, found chunk by chunk in bounded search steps. Each chunk is
/// acted on before the next is searched for, and the search goes on after the last record
/// read, so records removed or failing anew meanwhile are never visited twice.
struct Matching {
    filter: FailedFilter,
    left: usize,
    cursor: Option<Cursor>,
    done: bool,
}

impl Matching {
    fn new(filter: FailedFilter) -> Matching {
        Matching {
            left: filter.limit.unwrap_or(usize::MAX),
            filter,
            cursor: None,
            done: false,
        }
    }

    /// The next chunk of at most [`CHUNK`] records, or `None` at the end.
    async fn next_chunk(&mut self, admin: &Admin) -> Result<Option<Vec<Stored>>, AdminError> {
        while !self.done && self.left > 0 {
            let step = admin
                .failed_step(&self.filter, self.cursor.as_ref(), self.left.min(CHUNK))
                .await?;
            self.cursor = step.last.or(self.cursor.take());
            self.done = step.done;
            self.left -= step.stored.len().min(self.left);
            if !step.stored.is_empty() {
                return Ok(Some(step.stored));
            }
        }
        Ok(None)
    }
}
