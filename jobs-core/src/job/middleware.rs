//! The middleware pipeline: code run around a job's handler, inside its attempt. A
//! [`Middleware`] runs the rest of the job through [`Next`], which ends with the handler, its
//! panics caught. The built-in middleware live in [`crate::middleware`].

use async_trait::async_trait;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::job::context::JobContext;
use crate::job::result::{JobError, JobResult};

/// A running handler, as the worker drives it.
pub type JobFuture = Pin<Box<dyn Future<Output = JobResult> + Send + 'static>>;

/// Code run around a job's handler. See [`crate::middleware`].
///
/// ```
/// use redjob::middleware::{Middleware, Next};
/// use redjob::{JobContext, JobResult};
///
/// /// Logs how long each attempt took.
/// struct Timing;
///
/// #[redjob::async_trait]
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
