//! The worker's protocol: the queue operations only a worker makes (reserving, extending,
//! settling, renewing holds, running owed hooks). Applications never call them, so they are
//! not on [`RedisQueue`]'s public surface: the worker reaches them through [`WorkerQueue`],
//! exported from the hidden `redjob::__worker` module. Each forwards to the operation in its
//! role's file.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::payload::failed::FailedJob;
use crate::queue::connection::Connection;
use crate::queue::group::GroupLimits;
use crate::queue::handle::RedisQueue;
use crate::queue::hold::Hold;
use crate::queue::keys::QueueKeys;
use crate::queue::reserve::{PopArgs, Popped, Woken};
use crate::queue::settle::Settlement;

/// The queue operations of a worker. Not a public API: its shape follows the worker's needs.
pub trait WorkerQueue: Sync {
    /// Reserves up to `count` jobs of `queue`, its own and its groups' (`reserve.rs`), its
    /// groups held to no limit but their own and their queue's.
    fn pop(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        count: usize,
        migrate_limit: usize,
    ) -> impl Future<Output = Result<Popped>> + Send {
        self.pop_within(PopArgs {
            queue,
            retry_after,
            count,
            migrate_limit,
            groups: &GroupLimits::NONE,
        })
    }

    /// Makes the pop `pop`: reserves up to `pop.count` jobs of its queue, its own and its
    /// groups' (`reserve.rs`).
    fn pop_within(&self, pop: PopArgs<'_>) -> impl Future<Output = Result<Popped>> + Send;

    /// Waits on `conn`, a connection of its own to a single server, for a token of the notify
    /// lists `wait_on` (at most `block_for`), with the pop `pop`, if any, pipelined behind the
    /// wait, which Redis runs the moment the wait ends (`reserve.rs`).
    fn wait_then_pop(
        &self,
        conn: &mut Connection,
        wait_on: &[&str],
        block_for: Duration,
        pop: Option<PopArgs<'_>>,
    ) -> impl Future<Output = Result<Woken>> + Send;

    /// Deletes a finished job's reservation; `false` when it was no longer held.
    fn delete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Deletes finished jobs' reservations of one queue; returns how many were still held.
    fn delete_many(
        &self,
        queue: &QueueKeys,
        reserved: &[&str],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Deletes finished jobs' reservations in the groups of `queue`, each given as its group
    /// and reserved copy, bringing back the groups that were blocked, and appends their
    /// `completed` event when `completed` names them and the queue's events are on; returns
    /// how many were still held (`group.rs`).
    fn delete_in_groups(
        &self,
        queue: &QueueKeys,
        jobs: &[(&str, &str)],
        completed: Option<&[(&str, &str, u32)]>,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Extends reservations still held to `retry_after` from now; returns how many were.
    fn extend(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        reserved: &[&str],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Acknowledges a finished job and applies its settlement (`settle.rs`).
    fn complete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        settlement: &Settlement,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Releases a reserved job to run again after `delay`, freeing nothing.
    fn release(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move {
            let settlement = Settlement::default();
            self.release_with(queue, reserved, delay, None, &settlement)
                .await
        }
    }

    /// Releases a reserved job to run again after `delay`, putting `replacement` back instead
    /// when given and applying `settlement` (`settle.rs`).
    fn release_with(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
        replacement: Option<&str>,
        settlement: &Settlement,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Records a failed job, removing its reservation when `reserved` is given.
    fn fail(
        &self,
        queue: &QueueKeys,
        reserved: Option<&str>,
        record: &FailedJob,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move {
            let reserved = reserved.unwrap_or("").as_bytes();
            let settlement = Settlement::default();
            self.fail_with(queue, reserved, record, &settlement, None)
                .await
        }
    }

    /// Records a failed job and applies its settlement (`settle.rs`).
    fn fail_with(
        &self,
        queue: &QueueKeys,
        reserved: &[u8],
        record: &FailedJob,
        settlement: &Settlement,
        hook_claim: Option<Duration>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Renews the holds of running jobs for `lease` (`hold.rs`).
    fn renew_holds(
        &self,
        holds: &[Hold],
        lease: Duration,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Reports a failed job's `failed()` hook done (`failed.rs`).
    fn hook_done(&self, uuid: &str) -> impl Future<Output = Result<()>> + Send;

    /// Whether any owed `failed()` hook's time has come (`failed.rs`).
    fn hooks_due(&self) -> impl Future<Output = Result<bool>> + Send;

    /// Takes owed `failed()` hooks whose workers died (`failed.rs`).
    fn claim_hooks(
        &self,
        claim: Duration,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
}

impl WorkerQueue for RedisQueue {
    async fn pop_within(&self, pop: PopArgs<'_>) -> Result<Popped> {
        RedisQueue::pop(self, pop).await
    }

    async fn wait_then_pop(
        &self,
        conn: &mut Connection,
        wait_on: &[&str],
        block_for: Duration,
        pop: Option<PopArgs<'_>>,
    ) -> Result<Woken> {
        RedisQueue::wait_then_pop(self, conn, wait_on, block_for, pop).await
    }

    async fn delete(&self, queue: &QueueKeys, reserved: &str) -> Result<bool> {
        Ok(RedisQueue::delete_many(self, queue, &[reserved]).await? == 1)
    }

    async fn delete_many(&self, queue: &QueueKeys, reserved: &[&str]) -> Result<u64> {
        RedisQueue::delete_many(self, queue, reserved).await
    }

    async fn delete_in_groups(
        &self,
        queue: &QueueKeys,
        jobs: &[(&str, &str)],
        completed: Option<&[(&str, &str, u32)]>,
    ) -> Result<u64> {
        RedisQueue::delete_in_groups(self, queue, jobs, completed).await
    }

    async fn extend(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        reserved: &[&str],
    ) -> Result<u64> {
        RedisQueue::extend(self, queue, retry_after, reserved).await
    }

    async fn complete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        settlement: &Settlement,
    ) -> Result<bool> {
        RedisQueue::complete(self, queue, reserved, settlement).await
    }

    async fn release_with(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
        replacement: Option<&str>,
        settlement: &Settlement,
    ) -> Result<bool> {
        RedisQueue::release_with(self, queue, reserved, delay, replacement, settlement).await
    }

    async fn fail_with(
        &self,
        queue: &QueueKeys,
        reserved: &[u8],
        record: &FailedJob,
        settlement: &Settlement,
        hook_claim: Option<Duration>,
    ) -> Result<bool> {
        RedisQueue::fail_with(self, queue, reserved, record, settlement, hook_claim).await
    }

    async fn renew_holds(&self, holds: &[Hold], lease: Duration) -> Result<u64> {
        RedisQueue::renew_holds(self, holds, lease).await
    }

    async fn hook_done(&self, uuid: &str) -> Result<()> {
        RedisQueue::hook_done(self, uuid).await
    }

    async fn hooks_due(&self) -> Result<bool> {
        RedisQueue::hooks_due(self).await
    }

    async fn claim_hooks(&self, claim: Duration, limit: usize) -> Result<Vec<String>> {
        RedisQueue::claim_hooks(self, claim, limit).await
    }
}
