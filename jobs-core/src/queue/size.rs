//! A queue's sizes, and clearing it.

use crate::error::Result;
use crate::queue::handle::RedisQueue;
use crate::queue::keys::{check_queue_name, QueueKeys};

/// The most groups of a queue one operator's read looks at (its sizes, its listing): each
/// costs Redis a few microseconds, and the read is one script call, which nothing else runs
/// beside. Beyond it, a read is partial and says so.
pub const GROUPS_READ: usize = 1000;
use crate::queue::scripts;

/// Sizes of one queue, its groups' jobs included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSize {
    /// Jobs ready to run: in the queue's own list and in its groups'.
    pub ready: u64,
    /// Jobs delayed or released, waiting for their due time.
    pub delayed: u64,
    /// Jobs reserved by workers.
    pub reserved: u64,
    /// How many of the queue's groups have jobs (counted in the sizes above).
    pub groups: u64,
    /// Whether the queue has more groups than one read looks at
    /// ([`GROUPS_READ`]): then `groups` and the sizes above count
    /// only those it looked at.
    pub groups_partial: bool,
}

impl QueueSize {
    /// All jobs of the queue: as Laravel's `size()` counts them, and its groups' (which a
    /// Laravel app's queue never has).
    pub fn total(&self) -> u64 {
        self.ready + self.delayed + self.reserved
    }
}

impl RedisQueue {
    /// The sizes of a queue, its groups' jobs included (counted in a time proportional to its
    /// groups with jobs).
    pub async fn size(&self, queue: &str) -> Result<QueueSize> {
        let keys = self.queue_keys(queue);
        let mut pipe = redis::pipe();
        pipe.llen(&keys.ready)
            .zcard(&keys.delayed)
            .zcard(&keys.reserved);
        let (ready, delayed, reserved): (u64, u64, u64) = self.query_pipe(&pipe).await?;
        let grouped = self.group_totals(&keys).await?;
        Ok(QueueSize {
            ready: ready + grouped.ready,
            delayed: delayed + grouped.delayed,
            reserved: reserved + grouped.reserved,
            groups: grouped.groups,
            groups_partial: grouped.groups_partial,
        })
    }

    /// The jobs of the groups of `queue` ([`QueueSize`] of its groups alone), read from at
    /// most [`GROUPS_READ`] of them.
    pub(crate) async fn group_totals(&self, queue: &QueueKeys) -> Result<QueueSize> {
        let keys = queue.groups();
        let mut call = scripts::GROUP_TOTALS.key(&keys.rotation);
        call.key(&keys.blocked)
            .key(&keys.due)
            .arg(&keys.group_prefix)
            .arg(GROUPS_READ);
        let (groups, ready, delayed, reserved, partial): (u64, u64, u64, u64, u8) =
            self.invoke(&call).await?;
        Ok(QueueSize {
            ready,
            delayed,
            reserved,
            groups,
            groups_partial: partial == 1,
        })
    }

    /// Deletes every job of a queue; returns how many there were.
    pub async fn clear(&self, queue: &str) -> Result<u64> {
        check_queue_name(queue)?;
        let keys = self.queue_keys(queue);
        let mut call = scripts::CLEAR.key(&keys.ready);
        call.key(&keys.delayed)
            .key(&keys.reserved)
            .key(&keys.notify);
        self.invoke(&call).await
    }
}
