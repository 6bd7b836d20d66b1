//! The keys of [chains and batches](crate::workflow). On a cluster a chain's keys share its
//! id as their hash tag, and a batch's its id, so that the call settling one of their jobs
//! takes the workflow's step in one slot.

use super::Keys;

impl Keys {
    /// The links of the chain `id` still to run (`jobs:chain:<id>`, a LIST of
    /// [links](crate::workflow)); on a cluster the id is the hash tag.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().chain("7f3e"), "jobs:chain:7f3e");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").chain_catch("7f3e"), "jobs:chain:{7f3e}:catch");
    /// ```
    pub fn chain(&self, id: &str) -> String {
        self.tagged("chain", id)
    }

    /// The catch job of the chain `id` (`jobs:chain:<id>:catch`, a STRING holding a link),
    /// in the chain's slot.
    pub fn chain_catch(&self, id: &str) -> String {
        format!("{}:catch", self.chain(id))
    }

    /// The links the settled links of the chain `id` owe, by link uuid, on a cluster
    /// (`jobs:chain:<id>:owed`).
    pub fn chain_owed(&self, id: &str) -> String {
        format!("{}:owed", self.chain(id))
    }

    /// The record of the batch `id` (`jobs:batch:<id>`, a HASH: its name, counters, options
    /// and the times it was created, cancelled and finished); on a cluster the id is the hash
    /// tag, which the batch's other keys share.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().batch("9a1c"), "jobs:batch:9a1c");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").batch_pending("9a1c"), "jobs:batch:{9a1c}:pending");
    /// ```
    pub fn batch(&self, id: &str) -> String {
        self.tagged("batch", id)
    }

    /// The uuids of a batch's jobs that have not settled (`jobs:batch:<id>:pending`, a SET).
    pub fn batch_pending(&self, id: &str) -> String {
        format!("{}:pending", self.batch(id))
    }

    /// The uuids of a batch's jobs that failed, scored by when (`jobs:batch:<id>:failed`, a
    /// ZSET).
    pub fn batch_failed(&self, id: &str) -> String {
        format!("{}:failed", self.batch(id))
    }

    /// A batch's callback jobs (`jobs:batch:<id>:callbacks`, a HASH: `then`, `catch`,
    /// `finally` to a link).
    pub fn batch_callbacks(&self, id: &str) -> String {
        format!("{}:callbacks", self.batch(id))
    }

    /// The jobs of a batch that is a link of a chain, parked until the chain reaches it
    /// (`jobs:batch:<id>:parked`, a LIST of links).
    pub fn batch_parked(&self, id: &str) -> String {
        format!("{}:parked", self.batch(id))
    }

    /// The results of a batch's tracked jobs (`jobs:batch:<id>:results`, a HASH: uuid ->
    /// result JSON), for its callbacks to read.
    pub fn batch_results(&self, id: &str) -> String {
        format!("{}:results", self.batch(id))
    }

    /// Every key of the batch `id`: its record, pending and failed sets, callbacks, parked
    /// jobs, the steps recorded on a cluster, and its jobs' results.
    pub fn batch_family(&self, id: &str) -> [String; 7] {
        [
            self.batch(id),
            self.batch_pending(id),
            self.batch_failed(id),
            self.batch_callbacks(id),
            self.batch_parked(id),
            self.batch_owed(id),
            self.batch_results(id),
        ]
    }

    /// The jobs the settled jobs of the batch `id` owe, by job uuid, on a cluster
    /// (`jobs:batch:<id>:owed`).
    pub fn batch_owed(&self, id: &str) -> String {
        format!("{}:owed", self.batch(id))
    }

    /// Every batch's id, scored by when it was created (`jobs:batches`, a ZSET), for listing
    /// and pruning.
    pub fn batches(&self) -> String {
        self.ops("batches")
    }

    /// The batches not known to have finished (`jobs:batches:running`, a ZSET: id -> created at,
    /// Unix ms), so that the pending-batch gauges read those alone rather than every batch kept.
    /// Added with the batch; a member found finished or gone is dropped by the reader.
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().running_batches(), "jobs:batches:running");
    /// ```
    pub fn running_batches(&self) -> String {
        self.ops("batches:running")
    }

    /// When [`Keys::running_batches`] was first filled from [`Keys::batches`]
    /// (`jobs:batches:running:indexed`, a STRING of Unix ms): the batches an earlier version
    /// created, which it did not index as running, are added once.
    pub fn running_batches_indexed(&self) -> String {
        self.ops("batches:running:indexed")
    }
}
