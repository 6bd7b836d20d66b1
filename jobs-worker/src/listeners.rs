//! Listening to what a worker does: a job starting, finishing, failing an attempt, going back
//! to its queue or failing for good, and the worker's own loop and stop, as Laravel's queue
//! events (`JobProcessing`, `JobProcessed`, `JobExceptionOccurred`, `JobReleasedAfterException`,
//! `JobFailed`, `Looping`, `WorkerStopping`).
//!
//! A [`Listener`] implements the methods it cares for; the others do nothing. Give it to
//! [`Worker::listen`](crate::Worker::listen). Job events fire on the job's own task, after the
//! step they report is done in Redis (`processed` after the acknowledgement is handed over,
//! `failed` after the failed-job record is written), so a listener never reports what did not
//! happen. Each call is bounded by [`LISTENER_TIMEOUT`] and its panic is caught and logged: a
//! slow or broken listener costs its job's slot a moment, never the job. Dispatches are
//! reported on the dispatching side by [`RedisQueue::on_queued`](redjob::RedisQueue::on_queued).
//!
//! ```
//! use redjob_worker::listeners::{JobEvent, Listener};
//!
//! struct Alerts;
//!
//! #[redjob::async_trait]
//! impl Listener for Alerts {
//!     async fn failed(&self, job: &JobEvent, reason: &str) {
//!         eprintln!("{} {} failed: {reason}", job.display_name, job.uuid);
//!     }
//! }
//! # fn demo(worker: redjob_worker::Worker) -> redjob_worker::Worker { worker.listen(Alerts) }
//! ```

use futures_util::FutureExt;
use redjob::async_trait;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tracing::warn;
use uuid::Uuid;

use crate::exit::Exit;

/// The longest one listener call may take before the worker goes on without it.
pub const LISTENER_TIMEOUT: Duration = Duration::from_secs(5);

/// The job an event is about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobEvent {
    /// The job's uuid.
    pub uuid: Uuid,
    /// The job's registered name.
    pub job: String,
    /// Its name in logs and tools.
    pub display_name: String,
    /// The queue it was taken from.
    pub queue: String,
    /// This attempt's number (1 on the first run).
    pub attempt: u32,
}

/// Why a job went back to its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// Its attempt failed (an error, a panic, a timeout) and it has tries left.
    Exception,
    /// The job, or a middleware, released it; the attempt counts.
    Released,
    /// A middleware requeued it; the attempt does not count.
    Requeued,
    /// The worker stopped while it ran.
    Shutdown,
    /// The worker cannot run it (data it cannot decode): it waits for a worker that can, its
    /// attempt given back.
    Unrunnable,
}

/// What a worker reports. Every method does nothing unless implemented.
#[async_trait]
pub trait Listener: Send + Sync + 'static {
    /// A job is about to run (its middleware first).
    async fn processing(&self, _job: &JobEvent) {}

    /// A job finished: done, or skipped by a middleware.
    async fn processed(&self, _job: &JobEvent) {}

    /// An attempt ended in an error, a panic or a timeout.
    async fn exception(&self, _job: &JobEvent, _error: &str) {}

    /// A job went back to its queue, to run again after `after`.
    async fn released(&self, _job: &JobEvent, _after: Duration, _cause: Cause) {}

    /// A job failed for good; its failed-job record is written.
    async fn failed(&self, _job: &JobEvent, _reason: &str) {}

    /// The job loop is about to take its next turn (look for jobs, or wait for them).
    async fn looping(&self) {}

    /// The worker is stopping, for `exit`, its running jobs settled.
    async fn stopping(&self, _exit: &Exit) {}
}

/// The listeners of one worker.
#[derive(Clone, Default)]
pub(crate) struct Listeners(Arc<[Arc<dyn Listener>]>);

impl Listeners {
    /// These listeners, called in order.
    pub(crate) fn new(listeners: Vec<Arc<dyn Listener>>) -> Self {
        Listeners(listeners.into())
    }

    /// Whether there are none, so that events need not be built.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Calls `event` on every listener, each bounded and with its panic caught.
    pub(crate) async fn emit<'a, F, Fut>(&'a self, name: &str, event: F)
    where
        F: Fn(&'a dyn Listener) -> Fut,
        Fut: Future<Output = ()> + Send + 'a,
    {
        for listener in self.0.iter() {
            let call = AssertUnwindSafe(event(listener.as_ref())).catch_unwind();
            match tokio::time::timeout(LISTENER_TIMEOUT, call).await {
                Ok(Ok(())) => {}
                Ok(Err(panic)) => warn!(
                    event = name,
                    panic = %redjob::middleware::panic_message(&*panic),
                    "a listener panicked"
                ),
                Err(_) => warn!(event = name, "a listener ran out of time"),
            }
        }
    }
}
