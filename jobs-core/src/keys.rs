//! Every Redis key name the project reads or writes, in one place.
//!
//! The names are Laravel's, so an operator who knows `php artisan queue:*` recognises each one.
//! docs/redis-layout.md describes what each key holds and who reads and writes it.

/// Prefix of every queue key, as in Laravel.
pub const QUEUE_PREFIX: &str = "queues:";

/// Hash of failed jobs: uuid -> failed-job record (JSON).
pub const FAILED_JOBS: &str = "failed_jobs";

/// Sorted set of failed jobs: uuid, scored by the time of failure (seconds since the epoch).
pub const FAILED_JOBS_INDEX: &str = "failed_jobs:index";

/// The four keys of one queue.
///
/// ```
/// let keys = jobs_core::keys::QueueKeys::new("emails");
/// assert_eq!(keys.ready, "queues:emails");
/// assert_eq!(keys.delayed, "queues:emails:delayed");
/// assert_eq!(keys.reserved, "queues:emails:reserved");
/// assert_eq!(keys.notify, "queues:emails:notify");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueKeys {
    /// The queue's name, without the prefix.
    pub name: String,
    /// LIST of ready payloads: producers push to the tail, workers pop from the head.
    pub ready: String,
    /// ZSET of delayed and released payloads, scored by the time they become due.
    pub delayed: String,
    /// ZSET of reserved copies of running jobs, scored by the time the reservation expires.
    pub reserved: String,
    /// LIST of wake-up tokens, one per ready job, on which idle workers block.
    pub notify: String,
}

impl QueueKeys {
    /// The keys of the queue called `name`.
    pub fn new(name: &str) -> Self {
        let ready = format!("{QUEUE_PREFIX}{name}");
        QueueKeys {
            name: name.to_owned(),
            delayed: format!("{ready}:delayed"),
            reserved: format!("{ready}:reserved"),
            notify: format!("{ready}:notify"),
            ready,
        }
    }
}
