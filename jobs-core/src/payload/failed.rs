//! Failed-job records, as kept in the `failed_jobs` hash.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// One failed job, as Laravel's failed-job providers record it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedJob {
    /// The job's uuid (the payload's, or a new one for a payload that has none).
    pub uuid: String,
    /// The connection name (`"redis"` unless configured otherwise).
    pub connection: String,
    /// The queue the job was taken from.
    pub queue: String,
    /// The payload as pushed, before the failing reservation raised its attempts.
    pub payload: String,
    /// Why the job failed.
    pub exception: String,
    /// When it failed (RFC 3339, UTC).
    pub failed_at: String,
}

impl FailedJob {
    /// A record of a job failing now.
    pub fn new(
        uuid: impl Into<String>,
        connection: impl Into<String>,
        queue: impl Into<String>,
        payload: impl Into<String>,
        exception: impl Into<String>,
    ) -> Self {
        FailedJob {
            uuid: uuid.into(),
            connection: connection.into(),
            queue: queue.into(),
            payload: payload.into(),
            exception: exception.into(),
            failed_at: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }

    /// When the job failed, if the record's time parses.
    pub fn failed_at(&self) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(&self.failed_at)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The record as stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a failed-job record always serializes")
    }
}
