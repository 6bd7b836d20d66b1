//! Operating the queues without the job types: failed jobs, queue sizes and contents, pause
//! and resume, restart, live workers and per-minute metrics.
//!
//! Everything here works on raw payloads, so one tool serves any application. The `jobsctl`
//! command and its dashboard are built on [`Admin`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), jobs_core::admin::AdminError> {
//! use jobs_core::admin::{Admin, FailedFilter, FailedSelection};
//! let admin = Admin::open("redis://127.0.0.1:6379")?;
//! let failed = admin.failed(&FailedFilter::default()).await?;
//! println!("{} failed jobs", failed.len());
//! let report = admin.retry(&FailedSelection::Queue("emails".into())).await?;
//! println!("{} pushed back", report.retried.len());
//! println!("{:?}", admin.queue_stats("emails").await?);
//! # Ok(()) }
//! ```

use chrono::{DateTime, TimeZone, Utc};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::failed::FailedJob;
use crate::keys::{
    self, check_queue_name, InvalidQueueName, KeyLayout, QueueKeys, FAILED_JOBS, FAILED_JOBS_INDEX,
    PAUSED, QUEUE_PREFIX,
};
use crate::payload;
use crate::payload::RawFields;
use crate::queue::RedisQueue;
use crate::scripts;
use crate::telemetry::{Bucket, RecentJob, WorkerInfo};

/// Most script calls or keys sent in one pipeline.
const CHUNK: usize = 500;

/// What can go wrong operating the queues.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// Redis could not be reached or refused a command.
    #[error(transparent)]
    Queue(#[from] crate::Error),
    /// The handle is for a Redis Cluster. Retrying moves a job between the failed-job store's
    /// slot and its queue's, and the worker state is kept in keys of no common slot: the
    /// admin operations work on one Redis server (with its replicas) only, for now.
    #[error("the admin operations do not support a Redis Cluster yet")]
    ClusterUnsupported,
    /// The failed-job store has no job with this uuid.
    #[error("no failed job with uuid {0}")]
    FailedJobNotFound(String),
    /// A range of failed-job positions that selects nothing.
    #[error(
        "invalid range {first}-{last}: positions start at 1 and the first must not exceed the last"
    )]
    InvalidRange {
        /// The first position asked for.
        first: u64,
        /// The last position asked for.
        last: u64,
    },
}

impl From<InvalidQueueName> for AdminError {
    fn from(err: InvalidQueueName) -> Self {
        AdminError::Queue(err.into())
    }
}

impl From<redis::RedisError> for AdminError {
    fn from(err: redis::RedisError) -> Self {
        AdminError::Queue(err.into())
    }
}

/// The result of operations on the queues.
pub type Result<T, E = AdminError> = std::result::Result<T, E>;

/// Which failed jobs to list. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedFilter {
    /// Only jobs that failed on this queue.
    pub queue: Option<String>,
    /// Only jobs of this type: the payload's `job` or `displayName`, exactly.
    pub job: Option<String>,
    /// Only jobs whose exception, payload or uuid contains this text, ignoring case.
    pub text: Option<String>,
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
}

/// One job a retry pushed back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retried {
    /// The job's uuid.
    pub uuid: String,
    /// The queue it went back to.
    pub queue: String,
}

/// Sizes of one queue, and whether it is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// The queue's name.
    pub name: String,
    /// Ready + delayed + reserved, as Laravel's `size()` counts.
    pub size: u64,
    /// Jobs in the ready list.
    pub ready: u64,
    /// Jobs waiting for their due time.
    pub delayed: u64,
    /// Jobs held by workers.
    pub reserved: u64,
    /// Seconds since the oldest ready job was dispatched (its `createdAt`, against Redis's
    /// clock), as Laravel's `queue:monitor` measures it; `None` when nothing is ready.
    pub oldest_ready_secs: Option<u64>,
    /// Whether workers skip the queue.
    pub paused: bool,
}

/// A part of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    /// The ready list.
    Ready,
    /// The delayed set.
    Delayed,
    /// The reserved set.
    Reserved,
}

impl Section {
    /// Every section, in the order a job goes through them.
    pub const ALL: [Section; 3] = [Section::Ready, Section::Delayed, Section::Reserved];

    /// Its name: `ready`, `delayed` or `reserved`.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Ready => "ready",
            Section::Delayed => "delayed",
            Section::Reserved => "reserved",
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A section name that is not `ready`, `delayed` or `reserved`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown section {0:?}: expected ready, delayed or reserved")]
pub struct UnknownSection(pub String);

impl FromStr for Section {
    type Err = UnknownSection;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Section::ALL
            .into_iter()
            .find(|section| section.as_str() == s)
            .ok_or_else(|| UnknownSection(s.to_owned()))
    }
}

/// One job in a queue, as [`Admin::inspect`] shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedJob {
    /// Where it is.
    pub section: Section,
    /// The payload's `job` name, when it has one.
    pub job: Option<String>,
    /// The payload's `uuid`, when it has one.
    pub uuid: Option<String>,
    /// The payload's attempts number, when it has one.
    pub attempts: Option<u64>,
    /// For a delayed job, when it falls due; for a reserved one, when its reservation
    /// expires (by Redis's clock). `None` for a ready job.
    pub at: Option<DateTime<Utc>>,
    /// The payload, byte for byte (lossily decoded when it is not UTF-8).
    pub payload: String,
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

/// Operations on the queues of one Redis server. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    queue: RedisQueue,
}

/// A failed-job record with the exact bytes it is stored as.
struct Stored {
    raw: String,
    entry: FailedEntry,
}

impl Admin {
    /// Operations through an existing handle; [`AdminError::ClusterUnsupported`] for a
    /// Redis Cluster's.
    pub fn new(queue: RedisQueue) -> Result<Self> {
        match queue.layout() {
            KeyLayout::Standalone => Ok(Admin { queue }),
            KeyLayout::Cluster => Err(AdminError::ClusterUnsupported),
        }
    }

    /// Operations on the Redis at `url`. Call it inside a Tokio runtime.
    pub fn open(url: &str) -> Result<Self> {
        Admin::new(RedisQueue::open(url)?)
    }

    /// The handle these operations use.
    pub fn queue(&self) -> &RedisQueue {
        &self.queue
    }

    /// Failed jobs matching `filter`, newest first.
    pub async fn failed(&self, filter: &FailedFilter) -> Result<Vec<FailedEntry>> {
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
    pub async fn failed_count(&self) -> Result<u64> {
        let mut conn = self.queue.connection();
        Ok(self.queue.timed(conn.zcard(FAILED_JOBS_INDEX)).await?)
    }

    /// One failed job, or [`AdminError::FailedJobNotFound`].
    pub async fn failed_job(&self, uuid: &str) -> Result<FailedEntry> {
        let mut conn = self.queue.connection();
        let (raw, rank): (Option<String>, Option<u64>) = self
            .queue
            .timed(
                redis::pipe()
                    .hget(FAILED_JOBS, uuid)
                    .zrank(FAILED_JOBS_INDEX, uuid)
                    .query_async(&mut conn),
            )
            .await?;
        match raw {
            Some(raw) => Ok(stored(uuid, raw, rank.map_or(0, |r| r + 1)).entry),
            None => Err(AdminError::FailedJobNotFound(uuid.to_owned())),
        }
    }

    /// Pushes the selected failed jobs back onto their queues, each with its attempts reset to
    /// 0 and a wake-up token, and removes their records. Each job moves in one atomic script
    /// call, and only if its record is still the one read.
    pub async fn retry(&self, selection: &FailedSelection) -> Result<RetryReport> {
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
        for chunk in selected.chunks(CHUNK) {
            let calls: Vec<_> = chunk.iter().map(|stored| retry_call(stored)).collect();
            let pushed: Vec<i64> = self.queue.invoke_all(&[&scripts::RETRY], &calls).await?;
            for (stored, pushed) in chunk.iter().zip(pushed) {
                let record = &stored.entry.record;
                if pushed == 1 {
                    report.retried.push(Retried {
                        uuid: record.uuid.clone(),
                        queue: record.queue.clone(),
                    });
                } else {
                    report.missing.push(record.uuid.clone());
                }
            }
        }
        Ok(report)
    }

    /// Deletes one failed job's record, or fails with [`AdminError::FailedJobNotFound`].
    pub async fn forget(&self, uuid: &str) -> Result<()> {
        match self.forget_many(&[uuid.to_owned()]).await? {
            0 => Err(AdminError::FailedJobNotFound(uuid.to_owned())),
            _ => Ok(()),
        }
    }

    /// Deletes the failed jobs matching `filter` (its limit applies); returns how many.
    pub async fn forget_matching(&self, filter: &FailedFilter) -> Result<u64> {
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
    async fn forget_many(&self, uuids: &[String]) -> Result<u64> {
        let mut forgotten = 0;
        for chunk in uuids.chunks(CHUNK) {
            let mut conn = self.queue.connection();
            let (deleted, _): (u64, u64) = self
                .queue
                .timed(
                    redis::pipe()
                        .atomic()
                        .hdel(FAILED_JOBS, chunk)
                        .zrem(FAILED_JOBS_INDEX, chunk)
                        .query_async(&mut conn),
                )
                .await?;
            forgotten += deleted;
        }
        Ok(forgotten)
    }

    /// Deletes every failed job, or with `older_than` only those that failed longer ago than
    /// that (by Redis's clock); returns how many.
    pub async fn flush_failed(&self, older_than: Option<Duration>) -> Result<u64> {
        let mut conn = self.queue.connection();
        let Some(age) = older_than else {
            let (count,): (u64,) = self
                .queue
                .timed(
                    redis::pipe()
                        .atomic()
                        .hlen(FAILED_JOBS)
                        .del(&[FAILED_JOBS, FAILED_JOBS_INDEX])
                        .ignore()
                        .query_async(&mut conn),
                )
                .await?;
            return Ok(count);
        };
        const PER_CALL: u64 = 1000;
        let mut deleted = 0;
        loop {
            let mut call = scripts::PRUNE_FAILED.key(FAILED_JOBS);
            call.key(FAILED_JOBS_INDEX)
                .arg(format!("{:.3}", age.as_secs_f64()))
                .arg(PER_CALL);
            let removed: u64 = self.queue.timed(call.invoke_async(&mut conn)).await?;
            deleted += removed;
            if removed < PER_CALL {
                return Ok(deleted);
            }
        }
    }

    /// The queues Redis knows of, sorted: those with jobs, the paused ones, and those live
    /// workers take jobs from. An empty queue no worker serves has no keys, and is not listed.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let mut names = BTreeSet::new();
        let mut conn = self.queue.connection();
        let mut cursor: u64 = 0;
        let pattern = format!("{QUEUE_PREFIX}*");
        loop {
            let (next, found): (u64, Vec<String>) = self
                .queue
                .timed(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut conn),
                )
                .await?;
            for key in found {
                let name = &key[QUEUE_PREFIX.len()..];
                let name = [":delayed", ":reserved", ":notify"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(name);
                names.insert(name.to_owned());
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        names.extend(self.paused().await?);
        for worker in self.workers().await? {
            names.extend(worker.queues);
        }
        Ok(names.into_iter().collect())
    }

    /// The sizes of a queue, the age of its oldest ready job, and whether it is paused.
    pub async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        let mut stats = self.queues_stats(&[name.to_owned()]).await?;
        Ok(stats.remove(0))
    }

    /// [`Admin::queue_stats`] of each of `names`, in order, read in one round trip.
    pub async fn queues_stats(&self, names: &[String]) -> Result<Vec<QueueStats>> {
        const READS_PER_QUEUE: usize = 5;
        let mut pipe = redis::pipe();
        pipe.cmd("TIME");
        for name in names {
            let keys = QueueKeys::new(name);
            pipe.llen(&keys.ready)
                .zcard(&keys.delayed)
                .zcard(&keys.reserved)
                .lindex(&keys.ready, 0)
                .sismember(PAUSED, name);
        }
        let mut conn = self.queue.connection();
        let mut replies: Vec<redis::Value> = self.queue.timed(pipe.query_async(&mut conn)).await?;
        let reads = replies.split_off(1);
        let (now, _): (u64, u64) =
            redis::from_redis_value(replies.remove(0)).map_err(redis::RedisError::from)?;
        names
            .iter()
            .zip(reads.chunks(READS_PER_QUEUE))
            .map(|(name, reads)| {
                type Reads = (u64, u64, u64, Option<Vec<u8>>, bool);
                let (ready, delayed, reserved, oldest, paused): Reads =
                    redis::from_redis_value(redis::Value::Array(reads.to_vec()))
                        .map_err(redis::RedisError::from)?;
                let oldest_ready_secs = oldest
                    .and_then(|raw| {
                        RawFields::parse(std::str::from_utf8(&raw).ok()?).number("createdAt")
                    })
                    .map(|created| now.saturating_sub(created));
                Ok(QueueStats {
                    name: name.clone(),
                    size: ready + delayed + reserved,
                    ready,
                    delayed,
                    reserved,
                    oldest_ready_secs,
                    paused,
                })
            })
            .collect()
    }

    /// Up to `limit` jobs of one section of a queue, in the order workers take them: ready
    /// jobs from the head, delayed ones by due time, reserved ones by expiry.
    pub async fn inspect(
        &self,
        name: &str,
        section: Section,
        limit: usize,
    ) -> Result<Vec<QueuedJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let keys = QueueKeys::new(name);
        let mut conn = self.queue.connection();
        let last = limit as isize - 1;
        let members: Vec<(Vec<u8>, Option<f64>)> = match section {
            Section::Ready => {
                let items: Vec<Vec<u8>> =
                    self.queue.timed(conn.lrange(&keys.ready, 0, last)).await?;
                items.into_iter().map(|item| (item, None)).collect()
            }
            Section::Delayed | Section::Reserved => {
                let key = if section == Section::Delayed {
                    &keys.delayed
                } else {
                    &keys.reserved
                };
                let items: Vec<(Vec<u8>, f64)> = self
                    .queue
                    .timed(conn.zrange_withscores(key, 0, last))
                    .await?;
                items
                    .into_iter()
                    .map(|(item, score)| (item, Some(score)))
                    .collect()
            }
        };
        Ok(members
            .into_iter()
            .map(|(raw, score)| {
                let payload = String::from_utf8_lossy(&raw).into_owned();
                let summary = Summary::of(&payload);
                QueuedJob {
                    section,
                    job: summary.job,
                    uuid: summary.uuid,
                    attempts: summary.attempts,
                    at: score.and_then(time_of_score),
                    payload,
                }
            })
            .collect())
    }

    /// Deletes every job of a queue (ready, delayed and reserved); returns how many there
    /// were.
    pub async fn clear(&self, name: &str) -> Result<u64> {
        Ok(self.queue.clear(name).await?)
    }

    /// Pauses a queue: workers take no job from it until it is resumed (they notice within
    /// about a second). Returns `false` when it was already paused.
    pub async fn pause(&self, name: &str) -> Result<bool> {
        check_queue_name(name)?;
        let mut conn = self.queue.connection();
        let added: u64 = self.queue.timed(conn.sadd(PAUSED, name)).await?;
        Ok(added == 1)
    }

    /// Resumes a paused queue. Returns `false` when it was not paused.
    pub async fn resume(&self, name: &str) -> Result<bool> {
        check_queue_name(name)?;
        let mut conn = self.queue.connection();
        let removed: u64 = self.queue.timed(conn.srem(PAUSED, name)).await?;
        Ok(removed == 1)
    }

    /// The paused queues, sorted.
    pub async fn paused(&self) -> Result<Vec<String>> {
        let mut conn = self.queue.connection();
        let mut names: Vec<String> = self.queue.timed(conn.smembers(PAUSED)).await?;
        names.sort();
        Ok(names)
    }

    /// Asks every running worker to stop once its running jobs are done (exit status 0), as
    /// Laravel's `queue:restart` does; a process supervisor then starts the new version.
    /// Returns the time of the request, by Redis's clock.
    pub async fn restart(&self) -> Result<DateTime<Utc>> {
        let mut conn = self.queue.connection();
        let call = scripts::RESTART.key(keys::RESTART);
        let ms: i64 = self.queue.timed(call.invoke_async(&mut conn)).await?;
        Ok(Utc
            .timestamp_millis_opt(ms)
            .single()
            .unwrap_or_else(Utc::now))
    }

    /// The live workers (those whose heartbeat record has not expired), by name, host and pid.
    /// Entries of workers whose record expired are removed from the worker index.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let mut conn = self.queue.connection();
        let ids: Vec<String> = self.queue.timed(conn.zrange(keys::WORKERS, 0, -1)).await?;
        let mut workers = Vec::new();
        let mut dead = Vec::new();
        for chunk in ids.chunks(CHUNK) {
            let record_keys: Vec<String> = chunk.iter().map(|id| keys::worker(id)).collect();
            let records: Vec<Option<String>> = self
                .queue
                .timed(redis::cmd("MGET").arg(&record_keys).query_async(&mut conn))
                .await?;
            for (id, record) in chunk.iter().zip(records) {
                match record.and_then(|r| serde_json::from_str::<WorkerInfo>(&r).ok()) {
                    Some(worker) => workers.push(worker),
                    None => dead.push(id.clone()),
                }
            }
        }
        if !dead.is_empty() {
            let _: u64 = self.queue.timed(conn.zrem(keys::WORKERS, &dead)).await?;
        }
        workers.sort_by(|a, b| (&a.name, &a.host, a.pid).cmp(&(&b.name, &b.host, b.pid)));
        Ok(workers)
    }

    /// The last attempts workers finished on a queue, newest first, at most `limit` (workers
    /// keep the last [`keys::RECENT_LIMIT`]; they send them about once a second). Entries
    /// that do not parse are left out.
    pub async fn recent(&self, queue: &str, limit: usize) -> Result<Vec<RecentJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.queue.connection();
        let entries: Vec<String> = self
            .queue
            .timed(conn.lrange(keys::recent(queue), 0, limit as isize - 1))
            .await?;
        Ok(entries
            .iter()
            .filter_map(|entry| serde_json::from_str(entry).ok())
            .collect())
    }

    /// The counters of the last `minutes` minutes (the current one included), oldest first,
    /// one entry per minute, empty for minutes without jobs. Minutes are by this host's clock,
    /// as workers count them by theirs.
    pub async fn metrics(&self, minutes: u32) -> Result<Vec<MinuteMetrics>> {
        let now = crate::telemetry::minute_of(Utc::now());
        let first = now - i64::from(minutes) + 1;
        let all: Vec<i64> = (first..=now).collect();
        let mut metrics = Vec::with_capacity(all.len());
        for chunk in all.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for minute in chunk {
                pipe.hgetall(keys::metrics_minute(*minute));
            }
            let mut conn = self.queue.connection();
            let hashes: Vec<HashMap<String, u64>> =
                self.queue.timed(pipe.query_async(&mut conn)).await?;
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

    /// The records of these uuids (positions are not read: 0), and the uuids the store does
    /// not have.
    async fn stored_by_uuid(&self, uuids: &[String]) -> Result<(Vec<Stored>, Vec<String>)> {
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
    async fn stored_failed(&self) -> Result<Vec<Stored>> {
        let mut conn = self.queue.connection();
        let uuids: Vec<String> = self
            .queue
            .timed(conn.zrange(FAILED_JOBS_INDEX, 0, -1))
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
    async fn raw_records(&self, uuids: &[String]) -> Result<Vec<Option<String>>> {
        let mut conn = self.queue.connection();
        let mut records = Vec::with_capacity(uuids.len());
        for chunk in uuids.chunks(CHUNK) {
            let chunk_records: Vec<Option<String>> = self
                .queue
                .timed(
                    redis::cmd("HMGET")
                        .arg(FAILED_JOBS)
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
            record,
        },
    }
}

/// The script call that retries one stored record.
fn retry_call(stored: &Stored) -> redis::ScriptInvocation<'static> {
    let record = &stored.entry.record;
    let keys = QueueKeys::new(&record.queue);
    let fresh =
        payload::with_attempts(&record.payload, 0).unwrap_or_else(|| record.payload.clone());
    let mut call = scripts::RETRY.key(FAILED_JOBS);
    call.key(FAILED_JOBS_INDEX)
        .key(&keys.ready)
        .key(&keys.notify)
        .arg(&record.uuid)
        .arg(&stored.raw)
        .arg(fresh);
    call
}

/// What a listing shows of a raw payload, read leniently: any field may be missing.
struct Summary {
    job: Option<String>,
    display_name: Option<String>,
    uuid: Option<String>,
    attempts: Option<u64>,
}

impl Summary {
    fn of(raw: &str) -> Summary {
        let fields = RawFields::parse(raw);
        Summary {
            job: fields.text("job"),
            display_name: fields.text("displayName"),
            uuid: fields.text("uuid"),
            attempts: fields.number("attempts"),
        }
    }
}

/// A score (seconds since the epoch, with a fraction) as a time.
fn time_of_score(score: f64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt((score * 1000.0).round() as i64)
        .single()
}
