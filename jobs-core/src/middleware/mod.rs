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
//! use jobs_core::middleware::{Layer, Limit, RateLimited, WithoutOverlapping};
//! use jobs_core::{job, Job, JobContext, JobResult};
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

use async_trait::async_trait;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::job::registry::JobFuture;
use crate::job::{JobError, JobResult};
use crate::JobContext;
use busy::WhenBusy;

/// Code run around a job's handler. See the [module](self) documentation.
///
/// ```
/// use jobs_core::middleware::{Middleware, Next};
/// use jobs_core::{JobContext, JobResult};
///
/// /// Logs how long each attempt took.
/// struct Timing;
///
/// #[jobs_core::async_trait]
/// impl Middleware for Timing {
///     async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
///         let started = std::time::Instant::now();
///         let result = next.run(ctx).await;
///         println!("{} took {:?}", ctx.job_name(), started.elapsed());
///         result
///     }
/// }
/// ```
#[async_trait]
pub trait Middleware: Send + Sync + 'static {
    /// Runs around the rest of the job: call `next.run(ctx)` to go on, or return without it
    /// (after asking `ctx` for a verdict; with none, the job is settled as done, as Laravel
    /// does).
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult;
}

/// One middleware, as a job or a worker lists it: any [`Middleware`] converts into it.
#[derive(Clone)]
pub struct Layer(Arc<dyn Middleware>);

impl<M: Middleware> From<M> for Layer {
    fn from(middleware: M) -> Self {
        Layer(Arc::new(middleware))
    }
}

impl From<Arc<dyn Middleware>> for Layer {
    fn from(middleware: Arc<dyn Middleware>) -> Self {
        Layer(middleware)
    }
}

impl fmt::Debug for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Layer(..)")
    }
}

/// The rest of a job: the middleware after this one, then the handler.
pub struct Next<'a> {
    chain: &'a [Layer],
    handler: JobFuture,
}

impl<'a> Next<'a> {
    /// The chain `chain` around `handler`.
    pub fn new(chain: &'a [Layer], handler: JobFuture) -> Self {
        Next { chain, handler }
    }

    /// Runs the rest of the job. A panic in the handler comes back as an error whose source
    /// is a [`Panicked`], so that middleware sees it as it sees any failed attempt.
    pub async fn run(self, ctx: &JobContext) -> JobResult {
        match self.chain.split_first() {
            Some((first, rest)) => {
                let next = Next {
                    chain: rest,
                    handler: self.handler,
                };
                first.0.handle(ctx, next).await
            }
            None => CatchPanic(self.handler).await,
        }
    }
}

/// A handler that panicked, as the error its attempt ends with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {0}")]
pub struct Panicked(pub String);

/// Runs a handler, turning a panic into a [`Panicked`] error.
struct CatchPanic(JobFuture);

impl Future for CatchPanic {
    type Output = JobResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<JobResult> {
        let handler = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => Poll::Ready(Err(JobError::from(Panicked(panic_message(&*panic))))),
        }
    }
}

/// The message a panic carries (`panic!` with a literal or a formatted string).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-text payload".to_owned())
}

/// Runs the rest of the job holding `key` for this attempt, when `take` (a script call that
/// answers 1 once the attempt's owner token holds the key) succeeds; otherwise asks for
/// `when_busy`, to try again after `retry_after`. What is taken is recorded as a hold of the
/// attempt: renewed by the worker's heartbeat, freed when the job settles.
pub(crate) async fn run_holding(
    ctx: &JobContext,
    next: Next<'_>,
    redis: &crate::RedisQueue,
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
    let hold = crate::queue::hold::Hold {
        key,
        owner: ctx.owner(),
    };
    ctx.holds()
        .add(hold, crate::queue::hold::HoldUntil::Attempt);
    next.run(ctx).await
}

/// The worker's Redis handle, or the error a Redis-backed middleware ends the attempt with
/// when the job runs without one (or with a fake queue's, in a test).
pub(crate) fn redis<'c>(
    ctx: &'c JobContext,
    what: &str,
) -> Result<&'c crate::RedisQueue, JobError> {
    ctx.redis().filter(|redis| !redis.is_fake()).ok_or_else(|| {
        JobError::msg(format!(
            "{what} keeps its state in Redis: run the job in a worker, or synchronously with a \
             real Redis handle (jobs_worker::testing::Run::via)"
        ))
    })
}
