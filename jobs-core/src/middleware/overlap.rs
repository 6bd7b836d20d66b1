//! Keeping two jobs with one key from running at once.

use async_trait::async_trait;
use std::time::Duration;

use super::busy::{when_busy_builders, WhenBusy};
use super::{redis, run_holding, Middleware, Next};
use crate::job::context::JobContext;
use crate::job::JobResult;
use crate::queue::scripts;

/// Runs at most one job with a given key at a time, across every worker (Laravel's
/// `WithoutOverlapping`). A job whose key is taken is requeued after
/// [`release_after`](Self::release_after) (1 s by default) without counting an attempt.
///
/// The lock is a lease owned by the running attempt: the worker's heartbeat renews it while
/// the job runs, however long that is, and the step that settles the job frees it. A worker
/// that dies frees it within `retry_after`; there is no `expire_after` to choose.
///
/// ```
/// # use redjob::middleware::{Layer, WithoutOverlapping};
/// # struct SyncAccount { account: u64 }
/// # impl SyncAccount { fn middleware(&self) -> Vec<Layer> {
/// vec![WithoutOverlapping::key(self.account).release_after(10).into()]
/// # } }
/// ```
#[derive(Debug, Clone)]
pub struct WithoutOverlapping {
    key: String,
    shared: bool,
    release_after: Duration,
    when_busy: WhenBusy,
}

impl WithoutOverlapping {
    /// Locks on `key` among jobs of the same type.
    pub fn key(key: impl ToString) -> Self {
        WithoutOverlapping {
            key: key.to_string(),
            shared: false,
            release_after: Duration::from_secs(1),
            when_busy: WhenBusy::Requeue,
        }
    }

    /// Locks on the key across every job type that uses it (Laravel's `shared()`).
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    when_busy_builders! {
        /// How long a job whose key is taken waits before it tries again (seconds or a
        /// `Duration`).
        fn release_after;

        /// Counts the wait as an attempt, as Laravel's middleware does.
        fn count_attempt;

        /// Drops a job whose key is taken, settled as done (Laravel's `dontRelease()`).
        fn dont_release;
    }
}

#[async_trait]
impl Middleware for WithoutOverlapping {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        let redis = redis(ctx, "WithoutOverlapping")?;
        let scope = match self.shared {
            true => self.key.clone(),
            false => format!("{}:{}", ctx.job_name(), self.key),
        };
        let key = redis.keys().overlap(&scope);
        let mut take = scripts::OVERLAP.key(&key);
        take.arg(ctx.owner()).arg(ctx.lease().as_millis() as u64);
        run_holding(
            ctx,
            next,
            redis,
            key,
            &take,
            self.when_busy,
            self.release_after,
        )
        .await
    }
}
