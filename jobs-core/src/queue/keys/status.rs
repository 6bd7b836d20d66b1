//! The keys of watching and stopping jobs ([`crate::status`]): a tracked job's status record,
//! the cancel requests and the streams that tell of them, the stream of jobs settling for
//! good, and a queue's events.

use super::Keys;

impl Keys {
    /// A job's status (`jobs:status:<uuid>`, a HASH: its state, attempt, progress, worker,
    /// result or error), kept while it is open and for a while after it settles; on a
    /// cluster the uuid is the hash tag.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().status("9a1c"), "jobs:status:9a1c");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").status("9a1c"), "jobs:status:{9a1c}");
    /// ```
    pub fn status(&self, uuid: &str) -> String {
        self.tagged("status", uuid)
    }

    /// The pending cancel requests (`jobs:cancel`, a ZSET): the uuid of a job asked to stop,
    /// scored by when (Unix milliseconds, by Redis's clock). A worker skips a waiting job found
    /// here and stops a running one; the call that settles the job removes its entry.
    pub fn cancel_requests(&self) -> String {
        self.ops("cancel")
    }

    /// The stream telling workers of each cancel request as it is made (`jobs:cancel:signals`,
    /// `uuid`), so a running job is stopped within milliseconds; capped, as a worker that
    /// missed entries reads [`Keys::cancel_requests`] anyway.
    pub fn cancel_signals(&self) -> String {
        self.ops("cancel:signals")
    }

    /// The stream of tracked jobs as they settle for good (`jobs:settled`, `uuid` and `state`),
    /// capped: what a waiting dispatcher reads, so it learns of the outcome without polling.
    pub fn settled_signals(&self) -> String {
        self.ops("settled")
    }

    /// The queues whose events are on (`jobs:events`, a HASH): queue name -> the length its
    /// events stream ([`Keys::events`]) is kept at.
    pub fn events_on(&self) -> String {
        self.ops("events")
    }

    /// The events stream of the queue `name` (`queues:<name>:events`, a STREAM: `event`,
    /// `uuid`, `job`, `attempt`, `data`), in the queue's slot on a cluster.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().events("emails"), "queues:emails:events");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").events("emails"), "queues:{emails}:events");
    /// ```
    pub fn events(&self, name: &str) -> String {
        format!("{}:events", self.queue(name).ready)
    }

    /// The last checkpoint of the resumable job `uuid` taken from `queue` (`jobs:checkpoint:<uuid>`,
    /// a STRING of JSON; on a cluster under the queue's keys, in the slot of its reservation,
    /// which the script that saves it checks).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().checkpoint("exports", "9f0c"), "jobs:checkpoint:9f0c");
    /// assert_eq!(
    ///     Keys::new(KeyLayout::Cluster, "").checkpoint("exports", "9f0c"),
    ///     "queues:{exports}:checkpoint:9f0c"
    /// );
    /// ```
    pub fn checkpoint(&self, queue: &str, uuid: &str) -> String {
        self.under_queue(queue, "checkpoint", uuid)
    }
}
