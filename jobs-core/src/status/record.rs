//! A job's status as its record in Redis keeps it, and reading it.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use uuid::Uuid;

use crate::error::Result;
use crate::payload::failed::FailedJob;
use crate::queue::RedisQueue;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// On its queue, waiting for a worker.
    Queued,
    /// In its queue's delayed set, waiting for its time.
    Delayed,
    /// A worker runs it.
    Running,
    /// Back on its queue after an attempt, to run again after a delay.
    Released,
    /// It ran and is done.
    Done,
    /// It failed for good.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// Nothing is known of it: it is not tracked, or its record has expired.
    Unknown,
}

impl JobState {
    /// Whether the job will not run again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }

    /// The state's name, as the record stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Delayed => "delayed",
            JobState::Running => "running",
            JobState::Released => "released",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Unknown => "unknown",
        }
    }

    pub(crate) fn parse(state: &str) -> JobState {
        match state {
            "queued" => JobState::Queued,
            "delayed" => JobState::Delayed,
            "running" => JobState::Running,
            "released" => JobState::Released,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            _ => JobState::Unknown,
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is known of a job: its status record, or for an untracked job what the failed-job
/// store says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    /// The job's uuid.
    pub uuid: Uuid,
    /// Where it is.
    pub state: JobState,
    /// Its queue, when known.
    pub queue: Option<String>,
    /// Its job name, when known.
    pub job: Option<String>,
    /// Its attempt (0 before its first).
    pub attempt: u32,
    /// The id of the worker that runs it, or ran it last.
    pub worker: Option<String>,
    /// The last progress it reported (JSON).
    pub progress: Option<serde_json::Value>,
    /// Its result, once done (JSON): the handler's output; absent for `()`.
    pub result: Option<serde_json::Value>,
    /// Why it failed, was cancelled, or was released; or why its result was not kept.
    pub error: Option<String>,
    /// When the record last changed.
    pub updated_at: Option<DateTime<Utc>>,
}

impl JobStatus {
    /// A job nothing is known of.
    pub fn unknown(uuid: Uuid) -> JobStatus {
        JobStatus {
            uuid,
            state: JobState::Unknown,
            queue: None,
            job: None,
            attempt: 0,
            worker: None,
            progress: None,
            result: None,
            error: None,
            updated_at: None,
        }
    }

    /// The result as a `T`; `None` when there is none.
    pub fn result_as<T: DeserializeOwned>(&self) -> Option<serde_json::Result<T>> {
        self.result.clone().map(serde_json::from_value)
    }

    /// The status a record's fields (`HGETALL`) describe.
    pub(crate) fn from_record(uuid: Uuid, mut fields: HashMap<String, String>) -> JobStatus {
        let json = |text: Option<String>| {
            text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
        };
        JobStatus {
            uuid,
            state: fields
                .get("state")
                .map_or(JobState::Unknown, |s| JobState::parse(s)),
            queue: fields.remove("queue"),
            job: fields.remove("job"),
            attempt: fields
                .get("attempt")
                .and_then(|a| a.parse().ok())
                .unwrap_or(0),
            worker: fields.remove("worker"),
            progress: json(fields.remove("progress")),
            result: json(fields.remove("result")),
            error: fields.remove("error"),
            updated_at: fields
                .get("updated_ms")
                .and_then(|ms| ms.parse().ok())
                .and_then(DateTime::from_timestamp_millis),
        }
    }

    /// An untracked job found in the failed-job store.
    fn from_failed(uuid: Uuid, record: &str) -> JobStatus {
        let mut status = JobStatus::unknown(uuid);
        status.state = JobState::Failed;
        if let Ok(failed) = serde_json::from_str::<FailedJob>(record) {
            status.queue = Some(failed.queue.clone());
            status.updated_at = failed.failed_at();
            status.error = Some(failed.exception);
        }
        status
    }
}

impl RedisQueue {
    /// The results of the batch `batch`'s tracked jobs that are done, by uuid (JSON), kept as
    /// long as their status records: what its `then` callback reads
    /// ([`JobContext::callback_of`](crate::JobContext::callback_of) gives the batch's id).
    pub async fn batch_results(&self, batch: Uuid) -> Result<HashMap<Uuid, serde_json::Value>> {
        let key = self.keys().batch_results(&batch.to_string());
        let read: HashMap<String, String> = self.query(redis::cmd("HGETALL").arg(&key)).await?;
        Ok(read
            .into_iter()
            .filter_map(|(uuid, result)| {
                let result = serde_json::from_str(&result).ok()?;
                Some((uuid.parse().ok()?, result))
            })
            .collect())
    }

    /// What is known of the job `uuid`: a tracked job's status record (see
    /// [`crate::status`]); else, for a job in the failed-job store, that it failed and why;
    /// else [`JobState::Unknown`].
    pub async fn status(&self, uuid: Uuid) -> Result<JobStatus> {
        let key = self.keys().status(&uuid.to_string());
        let fields: HashMap<String, String> = self.query(redis::cmd("HGETALL").arg(&key)).await?;
        if !fields.is_empty() {
            return Ok(JobStatus::from_record(uuid, fields));
        }
        let failed: Option<String> = self
            .query(
                redis::cmd("HGET")
                    .arg(self.keys().failed_jobs())
                    .arg(uuid.to_string()),
            )
            .await?;
        Ok(match failed {
            Some(record) => JobStatus::from_failed(uuid, &record),
            None => JobStatus::unknown(uuid),
        })
    }
}
