//! What workers publish for operators, and how it is stored: the heartbeat record of each
//! live worker and the per-minute job counters.
//!
//! Workers write these (`redjob-worker`), and [`crate::admin`] reads them; both go through the
//! types here, so the stored format is defined once. docs/redis-layout.md describes the keys.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a worker's heartbeat record lives without being refreshed. A worker refreshes it
/// about every second, so a record that expires belongs to a worker that died or hangs.
pub const WORKER_TTL: Duration = Duration::from_secs(10);

/// How long per-minute metrics are kept unless the worker is told otherwise.
pub const DEFAULT_METRICS_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// One live worker, as its heartbeat record holds it (`jobs:worker:<id>`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// A unique id for this worker process (a v4 uuid).
    pub id: String,
    /// The worker's `--name`.
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its queues, highest priority first.
    pub queues: Vec<String>,
    /// Jobs it runs at once at most (`--concurrency`).
    pub concurrency: usize,
    /// Jobs it is running now.
    pub running: usize,
    /// Jobs it has processed since it started, whatever their outcome.
    pub processed: u64,
    /// Of those, the jobs that went to the failed-job store.
    pub failed: u64,
    /// When it started, by its clock.
    pub started_at: DateTime<Utc>,
    /// When it last refreshed this record, by its clock.
    pub last_heartbeat: DateTime<Utc>,
    /// The jobs it is running now (at most [`RUNNING_LISTED`]), oldest first.
    #[serde(default)]
    pub jobs: Vec<RunningJob>,
    /// The names of the job types it links, and so can run.
    #[serde(default)]
    pub job_types: Vec<String>,
}

/// How many of its running jobs a worker lists in its record.
pub const RUNNING_LISTED: usize = 100;

/// A job a worker is running, as its record lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningJob {
    /// The job's uuid.
    pub uuid: String,
    /// Its job name.
    pub job: String,
    /// Its queue.
    pub queue: String,
    /// Its attempt.
    pub attempt: u32,
    /// When its handler started, by the worker's clock.
    pub started_at: DateTime<Utc>,
    /// Whether it has a checkpoint, read back or saved (a resumable job): the tools read a
    /// running job's checkpoint from Redis only then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checkpointed: bool,
}

/// How a processed attempt ended, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptOutcome {
    /// The handler finished.
    Done,
    /// The job was put back to run again.
    Released,
    /// The job went to the failed-job store.
    Failed,
}

impl AttemptOutcome {
    /// Its name, as serialized and as the metrics label it: `done`, `released` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Done => "done",
            AttemptOutcome::Released => "released",
            AttemptOutcome::Failed => "failed",
        }
    }
}

impl std::str::FromStr for AttemptOutcome {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [
            AttemptOutcome::Done,
            AttemptOutcome::Released,
            AttemptOutcome::Failed,
        ]
        .into_iter()
        .find(|outcome| outcome.as_str() == text)
        .ok_or_else(|| format!("unknown outcome {text:?}: expected done, released or failed"))
    }
}

/// How many finished attempts a queue's recent-jobs list (`jobs:recent:<queue>`) keeps.
pub const RECENT_LIMIT: usize = 100;

/// One finished attempt, as a queue's recent-jobs list (`jobs:recent:<queue>`) holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentJob {
    /// The job's uuid.
    pub uuid: String,
    /// The payload's `job` name (`?` when it has none).
    pub job: String,
    /// The queue it was taken from.
    pub queue: String,
    /// The attempt's number (its payload's attempts once reserved; 0 when unknown).
    pub attempt: u32,
    /// How the attempt ended.
    pub outcome: AttemptOutcome,
    /// How long it took, in microseconds.
    pub runtime_us: u64,
    /// When it ended, by the worker's clock.
    pub finished_at: DateTime<Utc>,
    /// The `--name` of the worker that ran it.
    pub worker: String,
    /// Why it failed or was released, cut to [`RecentJob::REASON_LIMIT`] characters.
    pub reason: Option<String>,
    /// The job's tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl RecentJob {
    /// The longest reason kept, in characters: the failed-job store has the full text.
    pub const REASON_LIMIT: usize = 500;
}

/// Job counters of one queue or one job type over some time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    /// Attempts processed, whatever their outcome (so `processed - failed - released` were
    /// done).
    pub processed: u64,
    /// Attempts that ended in the failed-job store.
    pub failed: u64,
    /// Attempts that put the job back to run again (retries, releases, shutdown).
    pub released: u64,
    /// Total time the attempts took, in microseconds.
    pub runtime_us: u64,
}

impl OutcomeCounts {
    /// Counts one attempt.
    pub fn record(&mut self, outcome: AttemptOutcome, runtime: Duration) {
        self.processed += 1;
        match outcome {
            AttemptOutcome::Done => {}
            AttemptOutcome::Released => self.released += 1,
            AttemptOutcome::Failed => self.failed += 1,
        }
        self.runtime_us = self
            .runtime_us
            .saturating_add(runtime.as_micros().min(u64::MAX as u128) as u64);
    }

    /// Adds `other` to these counters.
    pub fn add(&mut self, other: &OutcomeCounts) {
        self.processed += other.processed;
        self.failed += other.failed;
        self.released += other.released;
        self.runtime_us = self.runtime_us.saturating_add(other.runtime_us);
    }

    /// Attempts that finished without error.
    pub fn done(&self) -> u64 {
        self.processed
            .saturating_sub(self.failed)
            .saturating_sub(self.released)
    }

    fn fields(&self) -> [(&'static str, u64); 4] {
        [
            ("processed", self.processed),
            ("failed", self.failed),
            ("released", self.released),
            ("runtime_us", self.runtime_us),
        ]
    }

    fn set(&mut self, counter: &str, value: u64) -> bool {
        match counter {
            "processed" => self.processed = value,
            "failed" => self.failed = value,
            "released" => self.released = value,
            "runtime_us" => self.runtime_us = value,
            _ => return false,
        }
        true
    }
}

/// The counters of one minute, by queue and by job type. Stored as one hash per minute
/// (`jobs:metrics:<unix minute>`) whose fields are `queue:<name>:<counter>` and
/// `job:<name>:<counter>`, `<counter>` being `processed`, `failed`, `released` or
/// `runtime_us`.
///
/// ```
/// use redjob::admin::{AttemptOutcome, Bucket};
/// use std::time::Duration;
/// let mut bucket = Bucket::default();
/// bucket.record("emails", "SendEmail", AttemptOutcome::Failed, Duration::from_millis(3));
/// let fields = bucket.increments();
/// assert!(fields.contains(&("queue:emails:failed".to_owned(), 1)));
/// let back = Bucket::from_fields(fields);
/// assert_eq!(back, bucket);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// OutcomeCounts by queue name.
    pub queues: BTreeMap<String, OutcomeCounts>,
    /// OutcomeCounts by job name (the payload's `job`).
    pub jobs: BTreeMap<String, OutcomeCounts>,
}

impl Bucket {
    /// Counts one attempt of a `job` taken from `queue`.
    pub fn record(&mut self, queue: &str, job: &str, outcome: AttemptOutcome, runtime: Duration) {
        counters_of(&mut self.queues, queue).record(outcome, runtime);
        counters_of(&mut self.jobs, job).record(outcome, runtime);
    }

    /// Adds `other` to this bucket.
    pub fn merge(&mut self, other: &Bucket) {
        for (name, counters) in &other.queues {
            counters_of(&mut self.queues, name).add(counters);
        }
        for (name, counters) in &other.jobs {
            counters_of(&mut self.jobs, name).add(counters);
        }
    }

    /// The sum over all queues: every attempt of the minute.
    pub fn total(&self) -> OutcomeCounts {
        let mut total = OutcomeCounts::default();
        for counters in self.queues.values() {
            total.add(counters);
        }
        total
    }

    /// The hash fields to increment, and by how much (zero counters left out).
    pub fn increments(&self) -> Vec<(String, u64)> {
        let scoped = [("queue", &self.queues), ("job", &self.jobs)];
        let mut fields = Vec::new();
        for (scope, map) in scoped {
            for (name, counters) in map {
                for (counter, value) in counters.fields() {
                    if value > 0 {
                        fields.push((format!("{scope}:{name}:{counter}"), value));
                    }
                }
            }
        }
        fields
    }

    /// A bucket from a stored hash's fields. Fields of another form are ignored.
    pub fn from_fields(fields: impl IntoIterator<Item = (String, u64)>) -> Bucket {
        let mut bucket = Bucket::default();
        for (field, value) in fields {
            let Some((scope, rest)) = field.split_once(':') else {
                continue;
            };
            let Some((name, counter)) = rest.rsplit_once(':') else {
                continue;
            };
            let map = match scope {
                "queue" => &mut bucket.queues,
                "job" => &mut bucket.jobs,
                _ => continue,
            };
            let mut counters = map.get(name).copied().unwrap_or_default();
            if counters.set(counter, value) {
                map.insert(name.to_owned(), counters);
            }
        }
        bucket
    }
}

/// The minute `time` falls in: Unix seconds / 60, the number in a metrics key.
pub fn minute_of(time: DateTime<Utc>) -> i64 {
    time.timestamp().div_euclid(60)
}

fn counters_of<'a>(
    map: &'a mut BTreeMap<String, OutcomeCounts>,
    name: &str,
) -> &'a mut OutcomeCounts {
    if !map.contains_key(name) {
        map.insert(name.to_owned(), OutcomeCounts::default());
    }
    map.get_mut(name).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_colons_survive_the_stored_form() {
        let mut bucket = Bucket::default();
        bucket.record(
            "a:b",
            "App\\Jobs:X",
            AttemptOutcome::Released,
            Duration::from_micros(7),
        );
        bucket.record(
            "a:b",
            "App\\Jobs:X",
            AttemptOutcome::Done,
            Duration::from_micros(3),
        );
        let back = Bucket::from_fields(bucket.increments());
        assert_eq!(back, bucket);
        let counters = back.queues["a:b"];
        assert_eq!(
            (counters.processed, counters.released, counters.done()),
            (2, 1, 1)
        );
        assert_eq!(counters.runtime_us, 10);
    }
}
