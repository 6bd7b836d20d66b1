//! The worker's side of reserving jobs: the fetcher pops jobs from the worker's queues in
//! strict priority order, each pop one `pop.lua` call of jobs-core's queue layer.

use redjob::__worker::{PopArgs, WorkerQueue};
use redjob::queue::keys::QueueKeys;
use redjob::queue::{GroupLimits, Popped};
use redjob::RedisQueue;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::control::Control;
use crate::runtime::reserved::Reserved;

/// Most jobs moved from `:delayed` or from `:reserved` to the ready list by one pop call:
/// enough to keep up with any backlog, small enough that one script call stays short.
pub(crate) const MIGRATE_LIMIT: usize = 1000;

/// What one round of fetching found.
#[derive(Debug, Default)]
pub(crate) struct Fetched {
    /// Reserved jobs, highest-priority queue first.
    pub jobs: Vec<Reserved>,
    /// Time until the earliest delayed job or reservation of any queue falls due.
    pub next_due: Option<Duration>,
}

impl Fetched {
    /// Adds what a pop of `queue` reserved.
    fn add(&mut self, queue: &Arc<QueueKeys>, popped: Popped) {
        self.next_due = match (self.next_due, popped.next_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut groups = GroupKeysOf::new(queue);
        for (raw, group) in popped.jobs.into_iter().zip(popped.groups) {
            self.jobs.push(Reserved {
                queue: groups.keys(group),
                raw,
                unreadable: None,
            });
        }
        for (bytes, group) in popped.unreadable.into_iter().zip(popped.unreadable_groups) {
            self.jobs.push(Reserved {
                queue: groups.keys(group),
                raw: String::from_utf8_lossy(&bytes).into_owned(),
                unreadable: Some(bytes),
            });
        }
    }
}

/// Pops jobs from a list of queues.
pub(crate) struct Fetcher {
    queue: RedisQueue,
    queues: Vec<Arc<QueueKeys>>,
    retry_after: Duration,
    groups: GroupLimits,
    control: Arc<Control>,
}

impl Fetcher {
    /// A fetcher for `queues`, highest priority first, skipping those `control` says are
    /// paused; `groups` are the limits of a group that has none of its own nor its queue's.
    pub(crate) fn new(
        queue: RedisQueue,
        queues: Vec<Arc<QueueKeys>>,
        retry_after: Duration,
        groups: GroupLimits,
        control: Arc<Control>,
    ) -> Self {
        Fetcher {
            queue,
            queues,
            retry_after,
            groups,
            control,
        }
    }

    /// Reserves up to `want` jobs, starting at the first queue and going down the list only for
    /// what the queues above could not fill. Paused queues are skipped: their delayed jobs are
    /// not migrated either, until they are resumed.
    pub(crate) async fn fetch(&self, want: usize) -> redjob::Result<Fetched> {
        let mut fetched = Fetched::default();
        for keys in &self.queues {
            let left = want - fetched.jobs.len();
            if left == 0 {
                break;
            }
            if self.control.is_paused(&keys.name) {
                continue;
            }
            let popped = WorkerQueue::of(&self.queue)
                .pop(self.pop_args(keys, left))
                .await?;
            fetched.add(keys, popped);
        }
        Ok(fetched)
    }

    /// The pop an idle worker sends behind its wait, for up to `count` jobs: only where it
    /// takes one queue (not paused). A pop covers one queue, so with several it would leave
    /// the others to a pop of the usual kind after it, one more round trip for a job of any
    /// other queue, and for a due job of any queue that the worker's timer, not a push, finds.
    pub(crate) fn pop_behind(self: &Arc<Self>, count: usize) -> Option<PopBehind> {
        let mut unpaused = self
            .queues
            .iter()
            .filter(|keys| !self.control.is_paused(&keys.name));
        let keys = unpaused.next()?;
        if unpaused.next().is_some() {
            return None;
        }
        Some(PopBehind {
            fetcher: self.clone(),
            keys: keys.clone(),
            count,
        })
    }

    /// A pop of up to `count` jobs of `keys`' queue.
    fn pop_args<'a>(&'a self, keys: &'a QueueKeys, count: usize) -> PopArgs<'a> {
        PopArgs {
            queue: keys,
            retry_after: self.retry_after,
            count,
            migrate_limit: MIGRATE_LIMIT,
            groups: &self.groups,
        }
    }
}

/// A pop of up to `count` jobs of the worker's queue, sent behind the waker's `BLPOP`
/// (`waker.rs`), so that a job pushed to an idle worker is reserved the moment its token is
/// served, without another round trip.
pub(crate) struct PopBehind {
    fetcher: Arc<Fetcher>,
    keys: Arc<QueueKeys>,
    count: usize,
}

impl PopBehind {
    /// How many jobs it may reserve.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The pop, to send behind the wait (`WorkerQueue::wait_then_pop`).
    pub(crate) fn args(&self) -> PopArgs<'_> {
        self.fetcher.pop_args(&self.keys, self.count)
    }

    /// The jobs it reserved, as a fetch's.
    pub(crate) fn fetched(&self, popped: Popped) -> Fetched {
        let mut fetched = Fetched::default();
        fetched.add(&self.keys, popped);
        fetched
    }
}

/// The keys of the jobs one pop of a queue reserved: the queue's own, or their group's, made
/// once per group.
struct GroupKeysOf<'q> {
    queue: &'q Arc<QueueKeys>,
    groups: Vec<Arc<QueueKeys>>,
}

impl<'q> GroupKeysOf<'q> {
    fn new(queue: &'q Arc<QueueKeys>) -> Self {
        GroupKeysOf {
            queue,
            groups: Vec::new(),
        }
    }

    /// The keys of a job reserved from `group` (`None`: the queue's own list).
    fn keys(&mut self, group: Option<String>) -> Arc<QueueKeys> {
        let Some(group) = group else {
            return self.queue.clone();
        };
        if let Some(keys) = self
            .groups
            .iter()
            .find(|k| k.group.as_ref() == Some(&group))
        {
            return keys.clone();
        }
        let keys = Arc::new(self.queue.for_group(&group));
        self.groups.push(keys.clone());
        keys
    }
}
