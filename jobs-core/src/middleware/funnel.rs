//! A concurrency limit across every worker.

use async_trait::async_trait;
use std::time::Duration;

use super::busy::{when_busy_builders, WhenBusy};
use super::{redis, run_holding, Middleware, Next};
use crate::job::context::JobContext;
use crate::job::JobResult;
use crate::queue::scripts;

/// Runs at most `limit` jobs under one name at once, across every worker and host
/// (Laravel's `Redis::funnel`). A job that finds every slot taken is requeued after
/// [`release_after`](Self::release_after) (1 s by default) without counting an attempt.
///
/// A slot is a lease owned by the running attempt: renewed by the worker's heartbeat while the
/// job runs, freed in the step that settles it, and freed within `retry_after` when its worker
/// dies. A long job keeps its slot (Laravel's expire after `releaseAfter` and let the limit be
/// exceeded).
///
/// ```
/// # use redjob::middleware::{Funnel, Layer};
/// # fn middleware() -> Vec<Layer> {
/// vec![Funnel::named("pdf-renderer").limit(4).into()]
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Funnel {
    name: String,
    limit: u32,
    release_after: Duration,
    when_busy: WhenBusy,
}

impl Funnel {
    /// The funnel called `name`, with one slot until [`limit`](Self::limit) says otherwise.
    pub fn named(name: impl ToString) -> Self {
        Funnel {
            name: name.to_string(),
            limit: 1,
            release_after: Duration::from_secs(1),
            when_busy: WhenBusy::Requeue,
        }
    }

    /// How many jobs may run at once.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    when_busy_builders! {
        /// How long a job that found no free slot waits before it tries again.
        fn release_after;

        /// Counts the wait as an attempt, as Laravel's `funnel()->then(.., release)` does.
        fn count_attempt;
    }
}

#[async_trait]
impl Middleware for Funnel {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        let redis = redis(ctx, "Funnel")?;
        let key = redis.keys().funnel(&self.name);
        let mut take = scripts::FUNNEL.key(&key);
        take.arg(ctx.owner())
            .arg(self.limit)
            .arg(ctx.lease().as_millis() as u64);
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
