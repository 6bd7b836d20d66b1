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

use crate::queue::handle::RedisQueue;

/// The worker's operations on a queue handle. Not a public API: its shape follows the worker's
/// needs. Made with [`WorkerQueue::of`]; as cheap to make and copy as a reference.
#[derive(Debug, Clone, Copy)]
pub struct WorkerQueue<'q> {
    /// The handle the operations go through.
    pub(crate) handle: &'q RedisQueue,
}

impl<'q> WorkerQueue<'q> {
    /// The worker's operations, through `handle`.
    pub fn of(handle: &'q RedisQueue) -> Self {
        Self { handle }
    }

    /// The handle the operations go through, for what applications may call too.
    pub fn handle(&self) -> &'q RedisQueue {
        self.handle
    }
}
