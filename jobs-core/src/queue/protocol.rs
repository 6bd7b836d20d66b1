//! The worker's door into Redis: every operation only a worker makes (reserving, extending,
//! acknowledging and settling jobs, renewing and freeing holds, running owed hooks, keeping
//! schedules, following cancel requests). Applications never call them, so none of them is on
//! [`RedisQueue`]'s public surface: the worker reaches them through [`WorkerQueue`], a view of
//! a handle exported from the hidden `redjob::__worker` module.
//!
//! Each operation is written where its role lives, as an `impl WorkerQueue` block beside the
//! script it calls (`reserve.rs`, `settle.rs`, `hold.rs`, `failed.rs`, `group.rs` here, and the
//! capabilities' own files above this layer: a batch's acknowledgement, the scheduler's calls,
//! cancel requests), and takes a parameter struct when it takes more than one argument, so a
//! call names what it passes and a new field changes no caller that does not use it.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::queue::durability::Durability;
use crate::queue::handle::RedisQueue;

/// How long an acknowledgement whose connection was lost before the replicas answered is made
/// again, waiting for a new primary: about a failover's length.
pub(crate) const RECONFIRM_WITHIN: Duration = Duration::from_secs(30);

/// The worker's operations on a queue handle. Not a public API: its shape follows the worker's
/// needs. Made with [`WorkerQueue::of`]; as cheap to make and copy as a reference.
#[derive(Debug, Clone, Copy)]
pub struct WorkerQueue<'q> {
    /// The handle the operations go through.
    pub(crate) handle: &'q RedisQueue,
    /// How many replicas must have an acknowledgement (a finished job's, a failed one's)
    /// before it counts as made.
    acks: Durability,
}

impl<'q> WorkerQueue<'q> {
    /// The worker's operations, through `handle`.
    pub fn of(handle: &'q RedisQueue) -> Self {
        Self {
            handle,
            acks: Durability::NONE,
        }
    }

    /// These operations, with the acknowledgements of finished and failed jobs (`delete`,
    /// `complete`, `complete_in_batch`, `fail`) made durable: each is followed by a `WAIT`
    /// for `acks.replicas` replicas on the handle's durable lane, shared by the
    /// acknowledgements in flight together ([`crate::queue::durability`]). When fewer replicas
    /// confirm, the acknowledgement stands and a warning says that a failover may run its
    /// jobs again.
    pub fn acknowledging(mut self, acks: Durability) -> Self {
        self.acks = acks;
        self
    }

    /// Runs an acknowledgement: `write` on the handle's durable lane, then the `WAIT` for
    /// the replicas, when acknowledgements are durable.
    ///
    /// When the connection is lost after the write and before the replicas answered, the
    /// primary may have died with the write: it is made again on a new connection (to the new
    /// primary, after a failover), where it changes nothing if it was kept, until the replicas
    /// answer or [`RECONFIRM_WITHIN`] has passed. Its outcome is the first write's.
    pub(crate) async fn acknowledged<T, F, Fut>(&self, write: F) -> Result<T>
    where
        F: Fn(RedisQueue) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (written, mut confirmation) = self.handle.durably(self.acks, &write).await?;
        let deadline = tokio::time::Instant::now() + RECONFIRM_WITHIN;
        let mut pause = Duration::from_millis(100);
        while matches!(&confirmation, Err(lost) if lost.confirmed.is_none())
            && tokio::time::Instant::now() + pause < deadline
        {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
            match self.handle.durably(self.acks, &write).await {
                Ok((_, again)) => confirmation = again,
                Err(err) => {
                    tracing::debug!(error = %err, "cannot make the acknowledgement again yet")
                }
            }
        }
        if let Err(not_durable) = confirmation {
            tracing::warn!(
                replicas = not_durable.wanted,
                confirmed = ?not_durable.confirmed,
                "an acknowledgement is not durable ({not_durable}); a failover now may run its jobs again"
            );
        }
        Ok(written)
    }

    /// Whether acknowledgements go through [`WorkerQueue::acknowledged`].
    pub(crate) fn durable_acks(&self) -> bool {
        !self.acks.is_none()
    }

    /// The handle the operations go through, for what applications may call too.
    pub fn handle(&self) -> &'q RedisQueue {
        self.handle
    }
}
