//! Jobs that wait for a worker able to run them: the job types some worker met and could not
//! run (a type it does not link, data it cannot decode), when, and whether any live worker
//! links them. During a rolling deploy such jobs wait for the new workers; a type that no live
//! worker links, for long, is a deploy that went wrong.
//!
//! Workers write what they met through [`met_commands`]; [`Admin::unrunnable`] reads it.

use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

use super::{Admin, AdminError};
use crate::queue::keys::Keys;

/// How long after a worker last met a job of a type the type is still listed: a waiting job
/// is offered to a worker again every few seconds, so one not met for this long has run, or
/// failed, or sits in a queue no worker serves.
pub const UNRUNNABLE_SEEN_WITHIN: Duration = Duration::from_secs(300);

/// How long the records live once no worker writes them any more.
const KEPT: Duration = Duration::from_secs(3600);

/// A job of a type that a worker could not run, as that worker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Met<'a> {
    /// The job's name (its payload's `job`).
    pub job: &'a str,
    /// The queue it was taken from.
    pub queue: &'a str,
    /// When a worker first met this job (Unix seconds, its payload's `unrunnableSince`).
    pub since: i64,
    /// When this worker met it (Unix seconds).
    pub at: i64,
    /// Why it could not run it.
    pub reason: &'a str,
}

/// What `jobs:unrunnable:seen` keeps of a type: the last meeting.
#[derive(Debug, Serialize, Deserialize)]
struct Seen {
    queue: String,
    at: i64,
    reason: String,
}

/// The commands that record `met` (single-key each, for a cluster): each type's earliest first
/// meeting kept (`ZADD LT`), its last meeting written over.
pub fn met_commands(keys: &Keys, met: &[Met<'_>]) -> Vec<redis::Cmd> {
    if met.is_empty() {
        return Vec::new();
    }
    let (index, seen) = (keys.unrunnable(), keys.unrunnable_seen());
    let mut commands = Vec::with_capacity(2 * met.len() + 2);
    for job in met {
        commands.push(
            redis::cmd("ZADD")
                .arg(&index)
                .arg("LT")
                .arg(job.since)
                .arg(job.job)
                .clone(),
        );
        let last = Seen {
            queue: job.queue.to_owned(),
            at: job.at,
            reason: job.reason.to_owned(),
        };
        let last = serde_json::to_string(&last).expect("a meeting serializes");
        commands.push(redis::cmd("HSET").arg(&seen).arg(job.job).arg(last).clone());
    }
    for key in [index, seen] {
        commands.push(redis::cmd("EXPIRE").arg(key).arg(KEPT.as_secs()).clone());
    }
    commands
}

/// A job type that a worker met and could not run, lately.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UnrunnableJobs {
    /// The job's name.
    pub job: String,
    /// The queue a worker last met it in.
    pub queue: String,
    /// When a worker first met a job of this type and could not run it.
    pub since: DateTime<Utc>,
    /// When a worker last did.
    pub last_seen: DateTime<Utc>,
    /// Why that worker could not run it.
    pub reason: String,
    /// How many live workers link this type: 0 means none can run its jobs, which wait until
    /// `--unknown-job-grace` and then fail.
    pub runnable_by: usize,
}

impl Admin {
    /// The job types some worker met and could not run within
    /// [`UNRUNNABLE_SEEN_WITHIN`], the longest waiting first, each with how many live workers
    /// link it.
    pub async fn unrunnable(&self) -> Result<Vec<UnrunnableJobs>, AdminError> {
        let keys = self.queue.keys();
        let mut conn = self.queue.connection();
        let index: Vec<(String, f64)> = self
            .queue
            .timed(conn.zrange_withscores(keys.unrunnable(), 0, -1))
            .await?;
        if index.is_empty() {
            return Ok(Vec::new());
        }
        let seen: HashMap<String, String> = self
            .queue
            .timed(conn.hgetall(keys.unrunnable_seen()))
            .await?;
        let workers = self.workers().await?;
        let now = Utc::now();
        let listed = index.into_iter().filter_map(|(job, since)| {
            let last: Seen = serde_json::from_str(seen.get(&job)?).ok()?;
            let last_seen = DateTime::from_timestamp(last.at, 0)?;
            if (now - last_seen).to_std().unwrap_or_default() > UNRUNNABLE_SEEN_WITHIN {
                return None;
            }
            let runnable_by = workers
                .iter()
                .filter(|worker| worker.job_types.contains(&job))
                .count();
            Some(UnrunnableJobs {
                queue: last.queue,
                since: DateTime::from_timestamp(since as i64, 0)?,
                last_seen,
                reason: last.reason,
                runnable_by,
                job,
            })
        });
        Ok(listed.collect())
    }
}
