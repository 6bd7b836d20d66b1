//! The keys operators' tools read (`jobsctl`, the dashboard, the Prometheus gauges): what
//! workers and outbox relays publish about themselves, each minute's job counters, each
//! queue's recent jobs, and the operators' switches (pause, waits, restart). They are under
//! `jobs:`, one per deployment, so none of them needs a hash tag on a cluster.

use super::Keys;

impl Keys {
    /// The live workers (`jobs:workers`, a ZSET): worker id, scored by its last heartbeat
    /// (Unix seconds, by the worker's clock). A member whose [`Keys::worker`] record has
    /// expired is a dead worker.
    pub fn workers(&self) -> String {
        self.ops("workers")
    }

    /// A worker's heartbeat record (JSON, with a TTL).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// let keys = Keys::new(KeyLayout::Standalone, "app_");
    /// assert_eq!(keys.worker("4f1c"), "app_jobs:worker:4f1c");
    /// ```
    pub fn worker(&self, id: &str) -> String {
        self.ops(&format!("worker:{id}"))
    }

    /// One minute's job counters (`jobs:metrics:<minute>`, a HASH), `minute` being Unix
    /// seconds / 60.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// let keys = Keys::new(KeyLayout::Standalone, "");
    /// assert_eq!(keys.metrics_minute(29_395_828), "jobs:metrics:29395828");
    /// ```
    pub fn metrics_minute(&self, minute: i64) -> String {
        self.ops(&format!("metrics:{minute}"))
    }

    /// The `SCAN` pattern of every minute's job counters ([`Keys::metrics_minute`]).
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().metrics_pattern(), "jobs:metrics:*");
    /// ```
    pub fn metrics_pattern(&self) -> String {
        self.ops("metrics:*")
    }

    /// A queue's most recently finished attempts (JSON, newest first, at most
    /// [`RECENT_LIMIT`](crate::admin::RECENT_LIMIT)).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// let keys = Keys::new(KeyLayout::Standalone, "");
    /// assert_eq!(keys.recent("emails"), "jobs:recent:emails");
    /// ```
    pub fn recent(&self, queue: &str) -> String {
        self.ops(&format!("recent:{queue}"))
    }

    /// The job types some worker met and could not run (`jobs:unrunnable`, a ZSET): job name,
    /// scored by the earliest time a worker first met a job of it (Unix seconds). Written by
    /// the workers that put such jobs back, read by `jobsctl unrunnable`, the dashboard and
    /// the Prometheus gauges.
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().unrunnable(), "jobs:unrunnable");
    /// ```
    pub fn unrunnable(&self) -> String {
        self.ops("unrunnable")
    }

    /// When a worker last met a job of each type in [`Keys::unrunnable`], with its queue and
    /// why it could not run it (`jobs:unrunnable:seen`, a HASH of JSON).
    pub fn unrunnable_seen(&self) -> String {
        self.ops("unrunnable:seen")
    }

    /// The paused queues (`jobs:paused`, a SET of names): workers take no job from them until
    /// they are resumed.
    pub fn paused(&self) -> String {
        self.ops("paused")
    }

    /// The wait thresholds of the queues (`jobs:waits`, a HASH): queue name -> the seconds its
    /// jobs may wait for a worker before the queue is flagged (Horizon's `waits`). Written by
    /// the worker's `--wait` and `jobsctl waits set`; read by `jobsctl`, the dashboard and the
    /// Prometheus gauges.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().waits(), "jobs:waits");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "app_").waits(), "app_jobs:waits");
    /// ```
    pub fn waits(&self) -> String {
        self.ops("waits")
    }

    /// The time of the last restart request (`jobs:restart`, a STRING of Unix milliseconds by
    /// Redis's clock), like Laravel's `illuminate:queue:restart`. A worker that sees it change
    /// after its start stops once its running jobs are done.
    pub fn restart(&self) -> String {
        self.ops("restart")
    }

    /// The live outbox relays (`jobs:outbox:relays`, a ZSET): relay id, scored by its last
    /// refresh (Unix seconds, by the relay's clock). A member whose [`Keys::outbox_relay`]
    /// record has expired is a relay that died.
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().outbox_relays(), "jobs:outbox:relays");
    /// ```
    pub fn outbox_relays(&self) -> String {
        self.ops("outbox:relays")
    }

    /// An outbox relay's record (JSON, with a TTL).
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().outbox_relay("4f1c"), "jobs:outbox:relay:4f1c");
    /// ```
    pub fn outbox_relay(&self, id: &str) -> String {
        self.ops(&format!("outbox:relay:{id}"))
    }
}
