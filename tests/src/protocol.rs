//! The worker's queue operations ([`redjob::__worker::WorkerQueue`]) in the short shapes the
//! tests of the queue's flow call them in: a reservation's keys and copy, and the defaults a
//! worker passes for everything else.

use std::future::Future;
use std::time::Duration;

use redjob::__worker::{
    BatchCompleteArgs, CompleteArgs, DeleteArgs, FailArgs, PopArgs, ReleaseArgs, Settlement,
    WorkerQueue,
};
use redjob::payload::failed::FailedJob;
use redjob::queue::keys::QueueKeys;
use redjob::queue::{GroupLimits, Popped};
use redjob::RedisQueue;
use uuid::Uuid;

/// The worker's operations on a handle, as the tests call them.
pub trait WorkerCalls {
    /// Reserves up to `count` jobs of `queue`, each for `retry_after`, after migrating at
    /// most `migrate_limit` due jobs of each kind.
    fn pop(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        count: usize,
        migrate_limit: usize,
    ) -> impl Future<Output = redjob::Result<Popped>> + Send;

    /// Deletes a finished job's reservation; `false` when it was no longer held.
    fn delete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
    ) -> impl Future<Output = redjob::Result<bool>> + Send;

    /// Releases a reserved job to run again after `delay`, freeing nothing.
    fn release(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
    ) -> impl Future<Output = redjob::Result<bool>> + Send;

    /// Acknowledges a finished job, applying `settlement`.
    fn complete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        settlement: &Settlement,
    ) -> impl Future<Output = redjob::Result<bool>> + Send;

    /// Records a failed job, removing its reservation when `reserved` is given.
    fn fail(
        &self,
        queue: &QueueKeys,
        reserved: Option<&str>,
        record: &FailedJob,
    ) -> impl Future<Output = redjob::Result<bool>> + Send;

    /// Records a failed job reserved as `reserved`, applying `settlement`.
    fn fail_with(
        &self,
        queue: &QueueKeys,
        reserved: &[u8],
        record: &FailedJob,
        settlement: &Settlement,
    ) -> impl Future<Output = redjob::Result<bool>> + Send;

    /// Acknowledges finished jobs of the batch `batch`, each given as its reserved copy and
    /// uuid, and counts them in the batch.
    fn complete_in_batch(
        &self,
        queue: &QueueKeys,
        batch: Uuid,
        finished: &[(&str, Uuid)],
    ) -> impl Future<Output = redjob::Result<u64>> + Send;
}

impl WorkerCalls for RedisQueue {
    async fn pop(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        count: usize,
        migrate_limit: usize,
    ) -> redjob::Result<Popped> {
        WorkerQueue::of(self)
            .pop(PopArgs {
                queue,
                retry_after,
                count,
                migrate_limit,
                groups: &GroupLimits::NONE,
            })
            .await
    }

    async fn delete(&self, queue: &QueueKeys, reserved: &str) -> redjob::Result<bool> {
        let deleted = WorkerQueue::of(self)
            .delete(DeleteArgs::new(queue, &[reserved]))
            .await?;
        Ok(deleted == 1)
    }

    async fn release(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        delay: Duration,
    ) -> redjob::Result<bool> {
        WorkerQueue::of(self)
            .release(ReleaseArgs {
                queue,
                reserved,
                delay,
                replacement: None,
                settlement: &Settlement::default(),
            })
            .await
    }

    async fn complete(
        &self,
        queue: &QueueKeys,
        reserved: &str,
        settlement: &Settlement,
    ) -> redjob::Result<bool> {
        WorkerQueue::of(self)
            .complete(CompleteArgs {
                queue,
                reserved,
                settlement,
            })
            .await
    }

    async fn fail(
        &self,
        queue: &QueueKeys,
        reserved: Option<&str>,
        record: &FailedJob,
    ) -> redjob::Result<bool> {
        let reserved = reserved.unwrap_or("").as_bytes();
        self.fail_with(queue, reserved, record, &Settlement::default())
            .await
    }

    async fn fail_with(
        &self,
        queue: &QueueKeys,
        reserved: &[u8],
        record: &FailedJob,
        settlement: &Settlement,
    ) -> redjob::Result<bool> {
        WorkerQueue::of(self)
            .fail(FailArgs {
                queue,
                reserved,
                record,
                settlement,
                hook_claim: None,
            })
            .await
    }

    async fn complete_in_batch(
        &self,
        queue: &QueueKeys,
        batch: Uuid,
        finished: &[(&str, Uuid)],
    ) -> redjob::Result<u64> {
        WorkerQueue::of(self)
            .complete_in_batch(BatchCompleteArgs {
                queue,
                batch,
                finished,
            })
            .await
    }
}
