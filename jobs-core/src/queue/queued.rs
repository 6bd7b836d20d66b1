//! [`Queued`]: a job just pushed, as the handle's `on_queued` listeners are told.

use std::sync::Arc;

use crate::payload::delay::Delay;

/// A job just pushed, as [`RedisQueue::on_queued`](crate::RedisQueue::on_queued) reports it
/// (Laravel's `JobQueued`).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Queued<'a> {
    /// The job's uuid.
    pub uuid: uuid::Uuid,
    /// Its registered name.
    pub job: &'a str,
    /// The queue it went to.
    pub queue: &'a str,
    /// Its delay, for a delayed job.
    pub delay: Option<Delay>,
    /// The payload as pushed.
    pub payload: &'a str,
}

/// A listener given to `on_queued`.
pub(crate) type QueuedListener = Arc<dyn Fn(&Queued<'_>) + Send + Sync>;
