//! A queue's sizes, and clearing it.

use crate::error::Result;
use crate::queue::handle::RedisQueue;
use crate::queue::keys::check_queue_name;
use crate::queue::scripts;

/// Sizes of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSize {
    /// Jobs in the ready list.
    pub ready: u64,
    /// Jobs delayed or released, waiting for their due time.
    pub delayed: u64,
    /// Jobs reserved by workers.
    pub reserved: u64,
}

impl QueueSize {
    /// All jobs of the queue, as Laravel's `size()` counts them.
    pub fn total(&self) -> u64 {
        self.ready + self.delayed + self.reserved
    }
}

impl RedisQueue {
    /// The sizes of a queue.
    pub async fn size(&self, queue: &str) -> Result<QueueSize> {
        let keys = self.queue_keys(queue);
        let mut pipe = redis::pipe();
        pipe.llen(&keys.ready)
            .zcard(&keys.delayed)
            .zcard(&keys.reserved);
        let (ready, delayed, reserved) = self.query_pipe(&pipe).await?;
        Ok(QueueSize {
            ready,
            delayed,
            reserved,
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
