//! Unique jobs: at most one job of a type and unique id queued or running at a time.
//!
//! A unique job's dispatch takes a lock, `jobs:unique:<job>:<unique id>`, in the same script
//! call that pushes it, so a lock never exists without its job. The lock holds the job's uuid
//! and lasts `unique_for` at most. It is kept through releases and retries, and freed in the
//! call that settles the job when it is done or has failed for good, or, for jobs unique
//! until processing, just before the handler runs. A dispatch that finds the lock taken
//! pushes nothing and returns [`Error::Duplicate`](crate::error::Error::Duplicate), naming the job
//! that holds it.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Until when a unique job keeps its lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UniqueUntil {
    /// Until it is done or has failed for good (Laravel's `ShouldBeUnique`).
    #[default]
    Done,
    /// Until its handler starts, once its middleware let it through (Laravel's
    /// `ShouldBeUniqueUntilProcessing`): another one may be queued while it runs.
    Processing,
}

/// The unique lock a payload carries: what it is named by, and until when it is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniqueLock {
    /// `<job>:<unique id>`: the lock's key without its prefix.
    pub key: String,
    /// Until when the job keeps it.
    pub until: UniqueUntil,
    /// How long it lasts at most, in seconds: a retried failed job takes it again for this
    /// long.
    #[serde(rename = "for")]
    pub lasts: u64,
}

/// A dispatch refused because another job holds its unique lock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {job} with unique id {unique_id:?} is already queued or running as {holder}")]
pub struct Duplicate {
    /// The job's registered name.
    pub job: String,
    /// The unique id both share.
    pub unique_id: String,
    /// The uuid of the job that holds the lock.
    pub holder: Uuid,
}

/// What became of one dispatch of a bulk dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatched {
    /// Pushed, with this uuid.
    Queued(Uuid),
    /// Not pushed: another job holds its unique lock.
    Duplicate(Duplicate),
}

impl Dispatched {
    /// The uuid of the job that will run: the one pushed, or the one holding the lock.
    pub fn uuid(&self) -> Uuid {
        match self {
            Dispatched::Queued(uuid) => *uuid,
            Dispatched::Duplicate(duplicate) => duplicate.holder,
        }
    }

    /// Whether it was refused as a duplicate.
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Dispatched::Duplicate(_))
    }
}
