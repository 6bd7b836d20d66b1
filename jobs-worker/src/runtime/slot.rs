//! One slot's task: it runs the job it was started with, and goes on with the jobs reserved
//! ahead of the slots while its jobs have to wait, so that the next job needs no hand-off
//! through the job loop.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use crate::runtime::ahead::Ahead;
use crate::runtime::lease::Held;
use crate::runtime::processor::Processor;
use crate::runtime::reserved::Reserved;
use crate::stats::Stats;

/// A reserved job not yet started (ahead of a free slot, or about to start in one).
pub(crate) struct Unstarted {
    pub(crate) job: Reserved,
    /// Its entry in the registry of this worker's reserved jobs, which extends its
    /// reservation.
    pub(crate) held: Held,
}

impl Unstarted {
    /// The job, marked started in the registry (it no longer waits for a slot).
    pub(crate) fn marked_started(self) -> Self {
        self.held.start();
        self
    }
}

/// One slot's task: processes its job, counts it, rests, and goes on with the next job
/// reserved ahead, until none waits or the worker is interrupted; then frees its slot.
///
/// Going on in the same task saves the next job a hand-off to the job loop and a new task,
/// each a turn behind the others ready to run; a job that awaits I/O starts its next that
/// much sooner. A job that never had to wait hands its slot back instead: a run of such jobs
/// in one task would keep the thread from the worker's other steps (its pops, its
/// acknowledgements) until no job waits ahead.
pub(crate) async fn run(
    processor: Arc<Processor>,
    stats: Arc<Stats>,
    rest: Duration,
    reserved: Unstarted,
    slot: OwnedSemaphorePermit,
    interrupt: CancellationToken,
    ahead: Ahead<Unstarted>,
) {
    let mut next = Some(reserved);
    while let Some(Unstarted { job, held }) = next {
        let waited = had_to_wait(async {
            // Boxed: the task's future is moved and copied whole as it is spawned, polled and
            // reaped, and the job's state would make that kilobytes per job.
            Box::pin(processor.process(job, held, interrupt.clone())).await;
            stats.record_processed();
            if !rest.is_zero() {
                tokio::time::sleep(rest).await;
            }
        })
        .await;
        // An interrupted job frees its slot: no job waiting ahead may start in it.
        next = if waited && !interrupt.is_cancelled() {
            ahead.take_for_slot().map(Unstarted::marked_started)
        } else {
            None
        };
    }
    drop(slot);
}

pin_project_lite::pin_project! {
    /// Runs its future to its end, and says whether it ever had to wait (it returned
    /// `Pending` to the runtime at least once, so that other tasks ran meanwhile).
    ///
    /// A struct, not an `async fn`: an `async fn` that pins its argument holds it twice in its
    /// state (the argument and the pinned local), and this wraps every job's future, which its
    /// task moves several times.
    struct HadToWait<F> {
        #[pin]
        future: F,
        waited: bool,
    }
}

fn had_to_wait<F: Future<Output = ()>>(future: F) -> HadToWait<F> {
    HadToWait {
        future,
        waited: false,
    }
}

impl<F: Future<Output = ()>> Future for HadToWait<F> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.project();
        match this.future.poll(cx) {
            Poll::Ready(()) => Poll::Ready(*this.waited),
            Poll::Pending => {
                *this.waited = true;
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_job_that_had_to_wait_is_told_from_one_that_did_not() {
        assert!(!had_to_wait(async {}).await);
        assert!(had_to_wait(tokio::task::yield_now()).await);
    }
}
