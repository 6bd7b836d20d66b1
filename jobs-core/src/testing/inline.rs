//! The inline extension point of a fake: a runner that runs what the fake records before the
//! dispatch returns (Laravel's `sync` driver). `redjob_worker::testing::inline` provides one.

use std::future::Future;
use std::pin::Pin;

use crate::queue::RedisQueue;
use crate::testing::recorded::{Recorded, RecordedBatch, RecordedChain};

/// Runs what a fake records, for a fake that runs dispatches inline (Laravel's `sync` driver).
/// `redjob_worker::testing::inline` provides one that runs jobs as a worker does.
pub trait RunInline: Send + Sync + 'static {
    /// Runs `work`, recorded by the fake whose handle is `queue`. Dispatches it makes go to
    /// the same fake when it runs in the dispatch's task.
    fn run<'a>(&'a self, queue: &'a RedisQueue, work: Work) -> BoxFuture<'a>;
}

/// A boxed future of [`RunInline::run`].
pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What a fake that runs dispatches inline hands its runner.
// Records of a test, built once and read: the size of their variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Work {
    /// A job pushed.
    Job(Recorded),
    /// A chain dispatched.
    Chain(RecordedChain),
    /// A batch dispatched.
    Batch(RecordedBatch),
}
