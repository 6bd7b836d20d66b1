//! The workers: restart requests, the live workers, their recent attempts and per-minute
//! metrics.

use chrono::{DateTime, TimeZone, Utc};
use redis::AsyncCommands;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use super::telemetry::{AttemptOutcome, Bucket, RecentJob, WorkerInfo, RECENT_LIMIT};
use super::{Admin, AdminError, CHUNK};
use crate::error::Result;
use crate::queue::scripts;

/// Which recent attempts to list. Empty fields match every attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentFilter {
    /// Only jobs with this tag.
    pub tag: Option<String>,
    /// Only jobs of this type (the payload's `job`).
    pub job: Option<String>,
    /// Only attempts that ended this way.
    pub outcome: Option<AttemptOutcome>,
}

impl RecentFilter {
    fn matches(&self, job: &RecentJob) -> bool {
        self.tag.as_ref().is_none_or(|tag| job.tags.contains(tag))
            && self.job.as_ref().is_none_or(|name| job.job == *name)
            && self.outcome.is_none_or(|outcome| job.outcome == outcome)
    }
}

/// One page of a queue's recent attempts, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentPage {
    /// The attempts of this page.
    pub jobs: Vec<RecentJob>,
    /// Where the next page starts (pass it as `after`), or `None` at the end.
    pub next: Option<String>,
}

/// The cursor naming one attempt: `<uuid>:<attempt>`.
fn recent_cursor(job: &RecentJob) -> String {
    format!("{}:{}", job.uuid, job.attempt)
}

/// The counters of one minute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinuteMetrics {
    /// The start of the minute.
    pub minute: DateTime<Utc>,
    /// Its counters by queue and by job type.
    #[serde(flatten)]
    pub bucket: Bucket,
}

impl Admin {
    /// Asks every running worker to stop once its running jobs are done (exit status 0), as
    /// Laravel's `queue:restart` does; a process supervisor then starts the new version.
    /// Returns the time of the request, by Redis's clock.
    pub async fn restart(&self) -> Result<DateTime<Utc>, AdminError> {
        let mut conn = self.queue.connection();
        let call = scripts::RESTART.key(self.queue.keys().restart());
        let ms: i64 = self.queue.timed(call.invoke_async(&mut conn)).await?;
        Ok(Utc
            .timestamp_millis_opt(ms)
            .single()
            .unwrap_or_else(Utc::now))
    }

    /// The live workers (those whose heartbeat record has not expired), by name, host and pid.
    /// Entries of workers whose record expired are removed from the worker index.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>, AdminError> {
        let keys = self.queue.keys();
        let mut workers: Vec<WorkerInfo> = self
            .live_records(&keys.workers(), |id| keys.worker(id))
            .await?;
        workers.sort_by(|a, b| (&a.name, &a.host, a.pid).cmp(&(&b.name, &b.host, b.pid)));
        Ok(workers)
    }

    /// The records of the live members of the sorted set `index` (workers, relays): each
    /// member's record is at `record_key(member)` and expires when its owner stops refreshing
    /// it. Members whose record has expired, or does not parse, are removed from the index.
    pub(super) async fn live_records<T: DeserializeOwned>(
        &self,
        index: &str,
        record_key: impl Fn(&str) -> String,
    ) -> Result<Vec<T>, AdminError> {
        let mut conn = self.queue.connection();
        let ids: Vec<String> = self.queue.timed(conn.zrange(index, 0, -1)).await?;
        let mut live = Vec::new();
        let mut dead = Vec::new();
        for chunk in ids.chunks(CHUNK) {
            let record_keys: Vec<String> = chunk.iter().map(|id| record_key(id)).collect();
            let records: Vec<Option<String>> = self
                .queue
                .timed(redis::cmd("MGET").arg(&record_keys).query_async(&mut conn))
                .await?;
            for (id, record) in chunk.iter().zip(records) {
                match record.and_then(|r| serde_json::from_str::<T>(&r).ok()) {
                    Some(record) => live.push(record),
                    None => dead.push(id.clone()),
                }
            }
        }
        if !dead.is_empty() {
            let _: u64 = self.queue.timed(conn.zrem(index, &dead)).await?;
        }
        Ok(live)
    }

    /// The last attempts workers finished on a queue, newest first, at most `limit` (workers
    /// keep the last [`RECENT_LIMIT`]; they send them about once a second). Entries that do
    /// not parse are left out.
    pub async fn recent(&self, queue: &str, limit: usize) -> Result<Vec<RecentJob>, AdminError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.queue.connection();
        let entries: Vec<String> = self
            .queue
            .timed(conn.lrange(self.queue.keys().recent(queue), 0, limit as isize - 1))
            .await?;
        Ok(entries
            .iter()
            .filter_map(|entry| serde_json::from_str(entry).ok())
            .collect())
    }

    /// One page of a queue's recent attempts that `filter` matches, newest first, at most
    /// `limit`, after the cursor `after` (a page's [`RecentPage::next`]). The list holds at most
    /// [`RECENT_LIMIT`] entries, so one `LRANGE` reads it whole; a cursor names the last
    /// attempt shown, and the next page starts after it wherever newer attempts pushed it (at
    /// the end once it dropped off the list).
    pub async fn recent_page(
        &self,
        queue: &str,
        filter: &RecentFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<RecentPage, AdminError> {
        let all = self.recent(queue, RECENT_LIMIT).await?;
        let start = match after {
            None => 0,
            Some(cursor) => match all.iter().position(|job| recent_cursor(job) == cursor) {
                Some(at) => at + 1,
                None => all.len(),
            },
        };
        let mut matching = all[start..].iter().filter(|job| filter.matches(job));
        let jobs: Vec<RecentJob> = matching.by_ref().take(limit).cloned().collect();
        let next = match (matching.next(), jobs.last()) {
            (Some(_), Some(last)) => Some(recent_cursor(last)),
            _ => None,
        };
        Ok(RecentPage { jobs, next })
    }

    /// The counters of the last `minutes` minutes (the current one included), oldest first,
    /// one entry per minute, empty for minutes without jobs. Minutes are by this host's clock,
    /// as workers count them by theirs.
    pub async fn metrics(&self, minutes: u32) -> Result<Vec<MinuteMetrics>, AdminError> {
        let now = crate::admin::telemetry::minute_of(Utc::now());
        let first = now - i64::from(minutes) + 1;
        let all: Vec<i64> = (first..=now).collect();
        let mut metrics = Vec::with_capacity(all.len());
        for chunk in all.chunks(CHUNK) {
            let reads: Vec<redis::Cmd> = chunk
                .iter()
                .map(|minute| {
                    let key = self.queue.keys().metrics_minute(*minute);
                    redis::cmd("HGETALL").arg(key).clone()
                })
                .collect();
            let hashes: Vec<HashMap<String, u64>> = self.queue.query_each(&reads).await?;
            for (minute, fields) in chunk.iter().zip(hashes) {
                metrics.push(MinuteMetrics {
                    minute: Utc
                        .timestamp_opt(minute * 60, 0)
                        .single()
                        .unwrap_or_default(),
                    bucket: Bucket::from_fields(fields),
                });
            }
        }
        Ok(metrics)
    }
}
