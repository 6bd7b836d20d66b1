//! The keys of [schedules](crate::schedule): each schedule's state, and which schedules the
//! workers keep and an operator asked to fire now.

use super::Keys;

impl Keys {
    /// The state of the schedule `name`, whose jobs go to `queue` (`jobs:schedule:<name>`, a
    /// HASH; on a cluster under the queue's keys, to be claimed in the call that pushes the
    /// tick's job).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().schedule("mail", "digest"), "jobs:schedule:digest");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").schedule("mail", "digest"), "queues:{mail}:schedule:digest");
    /// ```
    pub fn schedule(&self, queue: &str, name: &str) -> String {
        self.under_queue(queue, "schedule", name)
    }

    /// Every schedule a worker keeps, scored by when one last said so (Unix ms, Redis's clock):
    /// a schedule no worker has kept for a while is stale (`jobs:schedules`, a ZSET).
    pub fn schedules(&self) -> String {
        self.ops("schedules")
    }

    /// The queue of each schedule's job, by schedule name (`jobs:schedules:queues`, a HASH):
    /// on a cluster a schedule's state is under its queue's keys, found through this.
    pub fn schedule_queues(&self) -> String {
        self.ops("schedules:queues")
    }

    /// Names of schedules an operator asked to fire now (`jobs:schedules:run`, a LIST), taken
    /// by a worker that keeps them.
    pub fn schedule_runs(&self) -> String {
        self.ops("schedules:run")
    }
}
