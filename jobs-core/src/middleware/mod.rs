//! Job middleware: code that runs around a job's handler, inside its attempt.
//!
//! A middleware decides whether the handler runs now. It may run it ([`Next::run`]), or ask,
//! through the [`JobContext`], for one of the verdicts a handler can ask for:
//! [`release`](JobContext::release) (counts an attempt), [`requeue`](JobContext::requeue) (try
//! again later without counting one), [`skip`](JobContext::skip) (settled as done) or
//! [`fail`](JobContext::fail). It runs within the job's timeout, and a panic in it is caught
//! like one in the handler.
//!
//! Middleware comes from three places, outermost first: the worker's
//! (`Worker::middleware`), the job type's ([`Job::middleware`](crate::Job::middleware)), and
//! the dispatch's ([`PendingDispatch::through`](crate::PendingDispatch::through), by name).
//!
//! The built-in middleware keep their state in Redis, each check one script call on Redis's
//! clock, so they hold across any number of workers and hosts:
//! [`RateLimited`], [`Funnel`], [`WithoutOverlapping`], [`ThrottleExceptions`] and [`Skip`].
//! What a job holds while it runs (a funnel slot, an overlap lock) is a lease: the worker's
//! heartbeat renews it with the job's reservation, and the step that settles the job frees it.
//!
//! ```
//! use redjob::middleware::{Layer, Limit, RateLimited, WithoutOverlapping};
//! use redjob::{job, Job, JobContext, JobResult};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SyncAccount { account: u64 }
//!
//! #[job(tries = 3)]
//! impl Job for SyncAccount {
//!     fn middleware(&self) -> Vec<Layer> {
//!         vec![
//!             RateLimited::new(Limit::per_minute(60).by(self.account)).into(),
//!             WithoutOverlapping::key(self.account).into(),
//!         ]
//!     }
//!
//!     async fn handle(&self, _ctx: &JobContext) -> JobResult {
//!         Ok(())
//!     }
//! }
//! ```

mod busy;
mod funnel;
mod named;
mod overlap;
mod rate_limit;
mod skip;
mod throttle;

pub use funnel::Funnel;
pub use named::{define, find};
pub use overlap::WithoutOverlapping;
pub use rate_limit::{define_limit, Limit, RateLimited};
pub use skip::Skip;
pub use throttle::ThrottleExceptions;

pub use crate::job::middleware::{panic_message, JobFuture, Layer, Middleware, Next, Panicked};

use std::time::Duration;

use crate::job::context::JobContext;
use crate::job::{JobError, JobResult};
use crate::queue::hold::{Hold, HoldUntil};
use crate::queue::RedisQueue;
use busy::WhenBusy;

/// Runs the rest of the job holding `key` for this attempt, when `take` (a script call that
/// answers 1 once the attempt's owner token holds the key) succeeds; otherwise asks for
/// `when_busy`, to try again after `retry_after`. What is taken is recorded as a hold of the
/// attempt: renewed by the worker's heartbeat, freed when the job settles.
pub(crate) async fn run_holding(
    ctx: &JobContext,
    next: Next<'_>,
    redis: &RedisQueue,
    key: String,
    take: &redis::ScriptInvocation<'_>,
    when_busy: WhenBusy,
    retry_after: Duration,
) -> JobResult {
    let taken: u64 = redis.invoke(take).await?;
    if taken == 0 {
        when_busy.apply(ctx, retry_after);
        return Ok(());
    }
    let hold = Hold {
        key,
        owner: ctx.owner(),
    };
    ctx.holds().add(hold, HoldUntil::Attempt);
    next.run(ctx).await
}

/// The worker's Redis handle, or the error a Redis-backed middleware ends the attempt with
/// when the job runs without one (or with a fake queue's, in a test).
pub(crate) fn redis<'c>(ctx: &'c JobContext, what: &str) -> Result<&'c RedisQueue, JobError> {
    ctx.redis()
        .filter(|redis| !redis.is_offline())
        .ok_or_else(|| {
            JobError::msg(format!(
            "{what} keeps its state in Redis: run the job in a worker, or synchronously with a \
             real Redis handle (redjob_worker::testing::Run::via)"
        ))
        })
}
