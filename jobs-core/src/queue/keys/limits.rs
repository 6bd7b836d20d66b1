//! The keys of the per-job rules ([`crate::middleware`], unique and debounced jobs): rate
//! limits, concurrency limits, overlap locks, exception throttles, unique locks and debounce
//! windows. Each is shared by every worker, which is what makes the rule hold across them.

use super::{KeyLayout, Keys};

impl Keys {
    /// A rate limit's sliding window of admissions, for the limit `name` and the key `by`
    /// (empty: one window for every job under the limit). On a cluster every limit shares one
    /// hash tag, so that the limits of one job are checked and counted in one script call.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().limit("stripe", "acct:7"), "jobs:limit:stripe:acct:7");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").limit("stripe", ""), "jobs:limit:{limits}:stripe");
    /// ```
    pub fn limit(&self, name: &str, by: &str) -> String {
        let tag = match self.layout {
            KeyLayout::Standalone => "",
            KeyLayout::Cluster => "{limits}:",
        };
        let key = format!("limit:{tag}{name}");
        self.ops(&if by.is_empty() {
            key
        } else {
            format!("{key}:{by}")
        })
    }

    /// A concurrency limit's slots (`jobs:funnel:<name>`).
    pub fn funnel(&self, name: &str) -> String {
        self.tagged("funnel", name)
    }

    /// A lock against overlapping runs (`jobs:overlap:<scope>`).
    pub fn overlap(&self, scope: &str) -> String {
        self.tagged("overlap", scope)
    }

    /// An exception throttle's error count (`jobs:breaker:<key>`).
    pub fn breaker(&self, key: &str) -> String {
        self.tagged("breaker", key)
    }

    /// The unique lock `lock` (`<job>:<unique id>`) of a job dispatched to `queue`:
    /// `jobs:unique:<job>:<unique id>` on one server. On a cluster it must be in the queue's
    /// slot to be taken in the call that pushes the job, so it hangs under the queue's keys
    /// and a job is unique per queue there.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().unique("mail", "Rebuild:7"), "jobs:unique:Rebuild:7");
    /// assert_eq!(
    ///     Keys::new(KeyLayout::Cluster, "").unique("mail", "Rebuild:7"),
    ///     "queues:{mail}:unique:Rebuild:7"
    /// );
    /// ```
    pub fn unique(&self, queue: &str, lock: &str) -> String {
        self.under_queue(queue, "unique", lock)
    }

    /// The debounce state of the job `job` with debounce id `id`, dispatched to `queue`
    /// (`jobs:debounce:<job>:<id>`; on a cluster under the queue's keys, as [`Keys::unique`]).
    pub fn debounce(&self, queue: &str, lock: &str) -> String {
        self.under_queue(queue, "debounce", lock)
    }

    /// The `SCAN` pattern of every unique lock (on a cluster, of every queue's).
    pub fn unique_pattern(&self) -> String {
        match self.layout {
            KeyLayout::Standalone => self.ops("unique:*"),
            KeyLayout::Cluster => format!("{}:unique:*", self.queues_pattern()),
        }
    }
}
