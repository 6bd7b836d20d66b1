//! The queues: which exist, their sizes and contents, clearing, pausing and resuming them.

use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use super::waits::{exceeds, stored_threshold};
use super::{time_of_score, Admin, AdminError, Summary};
use crate::error::Result;
use crate::payload::RawFields;
use crate::queue::keys::check_queue_name;

/// Sizes of one queue, and whether it is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// The queue's name.
    pub name: String,
    /// Ready + delayed + reserved, as Laravel's `size()` counts, its groups' jobs included.
    pub size: u64,
    /// Jobs ready to run, in the queue's own list and in its groups'.
    pub ready: u64,
    /// Jobs waiting for their due time.
    pub delayed: u64,
    /// Jobs held by workers.
    pub reserved: u64,
    /// How many of the queue's groups have jobs ([`crate::groups`]); their jobs are counted
    /// above.
    #[serde(default)]
    pub groups: u64,
    /// Whether the queue has more groups than one read looks at
    /// ([`GROUPS_READ`](crate::queue::GROUPS_READ)): then the figures count the jobs of those
    /// it looked at.
    #[serde(default)]
    pub groups_partial: bool,
    /// Seconds since the oldest ready job was dispatched (its `createdAt`, against Redis's
    /// clock), as Laravel's `queue:monitor` measures it; `None` when nothing is ready.
    pub oldest_ready_secs: Option<u64>,
    /// Seconds since the earliest job that is due but still outside the ready list fell due:
    /// a delayed job past its due time, or a reserved one whose reservation expired (its
    /// worker died). Workers move such jobs to the ready list each time they pop the queue,
    /// so this stays `None` while a worker keeps popping it; it grows when none does (no
    /// worker serves the queue, every slot is busy, or the queue is paused).
    pub overdue_secs: Option<u64>,
    /// How long a job of the queue has been waiting for a worker: the larger of
    /// [`oldest_ready_secs`](Self::oldest_ready_secs) and
    /// [`overdue_secs`](Self::overdue_secs); `None` when no job waits.
    pub wait_secs: Option<u64>,
    /// The queue's wait threshold in seconds (`jobsctl waits set`, the worker's `--wait`), as
    /// Horizon's `waits`; `None` when it has none.
    pub wait_threshold_secs: Option<u64>,
    /// Whether [`wait_secs`](Self::wait_secs) is over
    /// [`wait_threshold_secs`](Self::wait_threshold_secs).
    pub wait_exceeded: bool,
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

impl Admin {
    /// The queues Redis knows of, sorted: those with jobs, the paused ones, and those live
    /// workers take jobs from. An empty queue no worker serves has no keys, and is not listed.
    pub async fn queues(&self) -> Result<Vec<String>, AdminError> {
        let keys = self.queue.keys();
        let pattern = keys.queues_pattern();
        let mut names = BTreeSet::new();
        // By type: on a cluster the unique locks, schedules and guards of a queue hang under
        // its name too, and none of them is a list or a sorted set.
        for (kind, suffixes) in [
            ("list", [":notify", ""]),
            ("zset", [":delayed", ":reserved"]),
        ] {
            for key in self.queue.scan_keys(&pattern, Some(kind)).await? {
                // A group's keys, and those of a queue's rotation, name their queue.
                let key = keys.queue_of_group_key(&key).unwrap_or(&key);
                let name = suffixes
                    .iter()
                    .find_map(|suffix| key.strip_suffix(suffix))
                    .and_then(|ready| keys.queue_name(ready));
                names.extend(name.map(str::to_owned));
            }
        }
        names.extend(self.paused().await?);
        for worker in self.workers().await? {
            names.extend(worker.queues);
        }
        Ok(names.into_iter().collect())
    }

    /// The sizes of a queue, the age of its oldest ready job, and whether it is paused.
    pub async fn queue_stats(&self, name: &str) -> Result<QueueStats, AdminError> {
        let mut stats = self.queues_stats(&[name.to_owned()]).await?;
        Ok(stats.remove(0))
    }

    /// [`Admin::queue_stats`] of each of `names`, in order, read in one round trip.
    pub async fn queues_stats(&self, names: &[String]) -> Result<Vec<QueueStats>, AdminError> {
        const READS_PER_QUEUE: usize = 8;
        let mut reads = vec![redis::cmd("TIME")];
        let keys = self.queue.keys();
        for name in names {
            let queue = self.queue.queue_keys(name);
            reads.extend([
                redis::cmd("LLEN").arg(&queue.ready).clone(),
                redis::cmd("ZCARD").arg(&queue.delayed).clone(),
                redis::cmd("ZCARD").arg(&queue.reserved).clone(),
                redis::cmd("LINDEX").arg(&queue.ready).arg(0).clone(),
                redis::cmd("SISMEMBER").arg(keys.paused()).arg(name).clone(),
                redis::cmd("ZRANGE")
                    .arg(&queue.delayed)
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES")
                    .clone(),
                redis::cmd("ZRANGE")
                    .arg(&queue.reserved)
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES")
                    .clone(),
                redis::cmd("HGET").arg(keys.waits()).arg(name).clone(),
            ]);
        }
        let mut replies: Vec<redis::Value> = self.queue.query_each(&reads).await?;
        let reads = replies.split_off(1);
        let (now, micros): (u64, u64) =
            redis::from_redis_value(replies.remove(0)).map_err(redis::RedisError::from)?;
        let now_precise = now as f64 + micros as f64 / 1e6;
        // Seconds since the earliest member of a sorted set fell due, when it has.
        let overdue = |first: Vec<(Vec<u8>, f64)>| {
            first
                .first()
                .filter(|(_, due)| *due <= now_precise)
                .map(|(_, due)| (now_precise - due) as u64)
        };
        let mut grouped = Vec::with_capacity(names.len());
        for name in names {
            grouped.push(
                self.queue
                    .group_totals(&self.queue.queue_keys(name))
                    .await?,
            );
        }
        names
            .iter()
            .zip(reads.chunks(READS_PER_QUEUE))
            .zip(grouped)
            .map(|((name, reads), grouped)| {
                type Reads = (u64, u64, u64, Option<Vec<u8>>, bool);
                type Heads = (Vec<(Vec<u8>, f64)>, Vec<(Vec<u8>, f64)>, Option<String>);
                let (ready, delayed, reserved, oldest, paused): Reads =
                    redis::from_redis_value(redis::Value::Array(reads[..5].to_vec()))
                        .map_err(redis::RedisError::from)?;
                let (first_delayed, first_reserved, threshold): Heads =
                    redis::from_redis_value(redis::Value::Array(reads[5..].to_vec()))
                        .map_err(redis::RedisError::from)?;
                let oldest_ready_secs = oldest
                    .and_then(|raw| {
                        RawFields::parse(std::str::from_utf8(&raw).ok()?).number("createdAt")
                    })
                    .map(|created| now.saturating_sub(created));
                let overdue_secs = overdue(first_delayed).max(overdue(first_reserved));
                let wait_secs = oldest_ready_secs.max(overdue_secs);
                let wait_threshold_secs = threshold
                    .map(|value| stored_threshold(name, value))
                    .transpose()?;
                let (ready, delayed, reserved) = (
                    ready + grouped.ready,
                    delayed + grouped.delayed,
                    reserved + grouped.reserved,
                );
                Ok(QueueStats {
                    name: name.clone(),
                    size: ready + delayed + reserved,
                    ready,
                    delayed,
                    reserved,
                    groups: grouped.groups,
                    groups_partial: grouped.groups_partial,
                    oldest_ready_secs,
                    overdue_secs,
                    wait_secs,
                    wait_threshold_secs,
                    wait_exceeded: exceeds(wait_secs, wait_threshold_secs),
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
    ) -> Result<Vec<QueuedJob>, AdminError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let keys = self.queue.queue_keys(name);
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
    pub async fn clear(&self, name: &str) -> Result<u64, AdminError> {
        Ok(self.queue.clear(name).await?)
    }

    /// Pauses a queue: workers take no job from it until it is resumed (they notice within
    /// about a second). Returns `false` when it was already paused.
    pub async fn pause(&self, name: &str) -> Result<bool, AdminError> {
        self.set_paused(name, true).await
    }

    /// Resumes a paused queue. Returns `false` when it was not paused.
    pub async fn resume(&self, name: &str) -> Result<bool, AdminError> {
        self.set_paused(name, false).await
    }

    /// Adds `name` to the paused set or removes it; `false` when it already was as asked.
    async fn set_paused(&self, name: &str, paused: bool) -> Result<bool, AdminError> {
        check_queue_name(name)?;
        let mut conn = self.queue.connection();
        let key = self.queue.keys().paused();
        let changed: u64 = if paused {
            self.queue.timed(conn.sadd(key, name)).await?
        } else {
            self.queue.timed(conn.srem(key, name)).await?
        };
        Ok(changed == 1)
    }

    /// The paused queues, sorted.
    pub async fn paused(&self) -> Result<Vec<String>, AdminError> {
        let mut conn = self.queue.connection();
        let mut names: Vec<String> = self
            .queue
            .timed(conn.smembers(self.queue.keys().paused()))
            .await?;
        names.sort();
        Ok(names)
    }
}

impl Admin {
    /// The stats of every queue that has a wait threshold, sorted by name: its current wait,
    /// threshold, and whether the wait is over it.
    pub async fn watched_queues(&self) -> Result<Vec<QueueStats>, AdminError> {
        let names: Vec<String> = self.waits().await?.into_keys().collect();
        self.queues_stats(&names).await
    }
}
