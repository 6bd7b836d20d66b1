//! The failed-job store (Laravel's `failed_jobs` and its index), the failed jobs whose
//! `failed()` hook is owed, and the guard of a retry on a cluster. On a cluster the store's
//! keys share the hash tag `{failed_jobs}`, so that one script call reads and prunes them.

use super::{KeyLayout, Keys};

impl KeyLayout {
    /// The failed-job hash in this layout: uuid -> failed-job record (JSON).
    pub fn failed_jobs(self) -> &'static str {
        match self {
            KeyLayout::Standalone => "failed_jobs",
            KeyLayout::Cluster => "{failed_jobs}",
        }
    }

    /// The failed-job index in this layout: a sorted set of the failed jobs' uuids, scored by
    /// the time of failure (seconds since the epoch).
    pub fn failed_jobs_index(self) -> &'static str {
        match self {
            KeyLayout::Standalone => "failed_jobs:index",
            KeyLayout::Cluster => "{failed_jobs}:index",
        }
    }

    /// The pending `failed()` hooks in this layout: a sorted set of the failed jobs whose hook
    /// has not finished, scored by when a worker may run it (again).
    pub fn failed_hooks(self) -> &'static str {
        match self {
            KeyLayout::Standalone => "failed_jobs:hooks",
            KeyLayout::Cluster => "{failed_jobs}:hooks",
        }
    }
}

impl Keys {
    /// The failed-job hash ([`KeyLayout::failed_jobs`]).
    pub fn failed_jobs(&self) -> String {
        self.prefixed(self.layout.failed_jobs())
    }

    /// The failed-job index ([`KeyLayout::failed_jobs_index`]).
    pub fn failed_jobs_index(&self) -> String {
        self.prefixed(self.layout.failed_jobs_index())
    }

    /// The failed jobs whose `failed()` hook has not finished ([`KeyLayout::failed_hooks`]).
    pub fn failed_hooks(&self) -> String {
        self.prefixed(self.layout.failed_hooks())
    }

    /// The guard of the retries of the failed job `uuid` onto `queue`
    /// (`queues:<name>:retried:<uuid>`), in the queue's slot; used on a cluster, where the
    /// failed-job store is in another slot and the record is removed in a second step. It holds
    /// when the failure last pushed back was recorded (the record's score in the failed-job
    /// index), which tells one failure of the job from the next.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(
    ///     Keys::new(KeyLayout::Cluster, "").retried("mail", "9a1c"),
    ///     "queues:{mail}:retried:9a1c"
    /// );
    /// ```
    pub fn retried(&self, queue: &str, uuid: &str) -> String {
        format!("{}:retried:{uuid}", self.queue(queue).ready)
    }
}
