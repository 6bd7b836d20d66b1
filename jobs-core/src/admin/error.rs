//! What can go wrong operating the queues: [`AdminError`], and [`InvalidWait`] for a wait
//! threshold.

use crate::queue::keys::InvalidQueueName;

/// What can go wrong operating the queues.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// Redis could not be reached or refused a command.
    #[error(transparent)]
    Queue(#[from] crate::error::Error),
    /// The failed-job store has no job with this uuid.
    #[error("no failed job with uuid {0}")]
    FailedJobNotFound(String),
    /// No worker keeps a schedule of this name (or none took the request to run it).
    #[error("no worker keeps schedule {0} (start one with --schedule), or none took the request")]
    ScheduleNotFound(String),
    /// No batch has this id (or it was pruned).
    #[error("no batch {0}")]
    BatchNotFound(String),
    /// No unique lock has this key.
    #[error("no unique lock {0}")]
    UniqueLockNotFound(String),
    /// A cursor that no page of a listing gave.
    #[error("invalid cursor {0:?}: pass the `next` of a page as it was given")]
    InvalidCursor(String),
    /// A wait threshold that cannot be set, or one stored in Redis that cannot be read.
    #[error(transparent)]
    InvalidWait(#[from] InvalidWait),
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

/// A wait threshold that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidWait {
    /// Not written `QUEUE=SECONDS`.
    #[error("invalid wait threshold {0:?}: expected QUEUE=SECONDS, e.g. emails=60")]
    Format(String),
    /// The queue's name is one no worker could serve.
    #[error(transparent)]
    Queue(#[from] InvalidQueueName),
    /// The seconds are not a whole number of at least 1.
    #[error(
        "invalid wait threshold for queue {queue}: {value:?} is not a whole number of seconds of at least 1"
    )]
    Seconds {
        /// The queue's name.
        queue: String,
        /// The seconds as given.
        value: String,
    },
    /// The threshold stored in Redis for a queue is not a whole number of seconds (it was
    /// written by hand); `jobsctl waits set` or `jobsctl waits clear` replaces it.
    #[error(
        "the wait threshold stored for queue {queue} is {value:?}, not a whole number of seconds: set it again with `jobsctl waits set` or remove it with `jobsctl waits clear`"
    )]
    Stored {
        /// The queue's name.
        queue: String,
        /// The value found in Redis.
        value: String,
    },
}
