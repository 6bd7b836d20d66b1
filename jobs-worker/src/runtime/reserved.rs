//! A reserved job as the worker holds it, the type every runtime role passes along.

use redjob::queue::keys::QueueKeys;
use std::sync::Arc;

/// A job taken from a queue: the queue and the reserved copy, byte for byte.
#[derive(Debug, Clone)]
pub(crate) struct Reserved {
    /// The queue it came from.
    pub queue: Arc<QueueKeys>,
    /// The reserved copy as the pop script returned it (for a payload that is not UTF-8, a
    /// lossy rendering of it, for logs and the failed-job record).
    pub raw: String,
    /// The exact bytes of a reserved payload that is not UTF-8; such a job can only fail.
    pub unreadable: Option<Vec<u8>>,
}

impl Reserved {
    /// The reserved copies of `jobs`, grouped by reserved set (a queue's own, or one group's),
    /// for one Redis call per set.
    pub(crate) fn by_queue(jobs: &[Reserved]) -> Vec<(&QueueKeys, Vec<&str>)> {
        let mut groups: Vec<(&QueueKeys, Vec<&str>)> = Vec::new();
        for job in jobs {
            match groups
                .iter_mut()
                .find(|(keys, _)| keys.reserved == job.queue.reserved)
            {
                Some((_, members)) => members.push(&job.raw),
                None => groups.push((&job.queue, vec![&job.raw])),
            }
        }
        groups
    }
}

/// Which job an attempt settles: the failed-job record's uuid, and the metrics' job name and
/// attempt.
#[derive(Clone, Copy)]
pub(crate) struct JobId<'a> {
    /// The job's uuid.
    pub(crate) uuid: &'a str,
    /// The payload's job name, or `?`.
    pub(crate) job: &'a str,
    /// The payload's attempts number (0 when it did not decode).
    pub(crate) attempt: u32,
    /// The payload's tags.
    pub(crate) tags: &'a [String],
    /// A failing job whose type has a `failed()` hook: the hook is owed with the record.
    pub(crate) failed_hook: bool,
}
