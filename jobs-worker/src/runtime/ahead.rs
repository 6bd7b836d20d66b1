//! Jobs reserved ahead of a free slot, shared by the job loop and the slots' tasks.
//!
//! The job loop adds the jobs a pop reserved ahead, in the order Redis reserved them. A slot's
//! task takes the next as its job ends and runs it at once, with no hand-off through the loop;
//! the loop starts the rest in slots it finds free. Since the tasks take jobs without the loop,
//! the loop says how few jobs left should wake it ([`Ahead::wake_at`]): then the next pop
//! ahead of the slots is due.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

/// The queue of jobs reserved ahead (`T` is the job), cloned into every slot's task.
pub(crate) struct Ahead<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    jobs: Mutex<VecDeque<T>>,
    /// One more than the number of jobs left at which [`Ahead::next`] wakes the loop; 0 for
    /// never.
    wake_below: AtomicUsize,
    running_low: Notify,
}

impl<T> Default for Ahead<T> {
    fn default() -> Self {
        Ahead {
            shared: Arc::new(Shared {
                jobs: Mutex::new(VecDeque::new()),
                wake_below: AtomicUsize::new(0),
                running_low: Notify::new(),
            }),
        }
    }
}

impl<T> Clone for Ahead<T> {
    fn clone(&self) -> Self {
        Ahead {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> Ahead<T> {
    fn jobs(&self) -> MutexGuard<'_, VecDeque<T>> {
        // A panic elsewhere cannot leave the queue half changed: every change is one call.
        self.shared
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many jobs wait.
    pub(crate) fn len(&self) -> usize {
        self.jobs().len()
    }

    /// Whether no job waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.jobs().is_empty()
    }

    /// Adds jobs after those waiting.
    pub(crate) fn extend(&self, jobs: impl IntoIterator<Item = T>) {
        self.jobs().extend(jobs);
    }

    /// Takes the first job waiting, for the loop itself (which looks at what is left on its
    /// next turn).
    pub(crate) fn take(&self) -> Option<T> {
        self.jobs().pop_front()
    }

    /// Takes the first job waiting, for a slot's task: wakes the loop ([`Ahead::running_low`])
    /// if that leaves as few as [`Ahead::wake_at`] asked.
    pub(crate) fn take_for_slot(&self) -> Option<T> {
        let (next, left) = {
            let mut jobs = self.jobs();
            (jobs.pop_front()?, jobs.len())
        };
        if left < self.shared.wake_below.load(Ordering::Relaxed) {
            // A permit, not only a wake-up of a loop already waiting: the loop may be between
            // setting the mark and waiting for it.
            self.shared.running_low.notify_one();
        }
        Some(next)
    }

    /// Takes every job waiting, in order.
    pub(crate) fn drain(&self) -> Vec<T> {
        self.jobs().drain(..).collect()
    }

    /// Has [`Ahead::running_low`] return once a job taken leaves at most `len` waiting (`None`:
    /// never). Replaces the mark set before.
    pub(crate) fn wake_at(&self, len: Option<usize>) {
        let below = len.map_or(0, |len| len.saturating_add(1));
        self.shared.wake_below.store(below, Ordering::Relaxed);
    }

    /// Returns once a job taken left as few waiting as [`Ahead::wake_at`] asked (at once if
    /// that happened since the last call returned).
    pub(crate) async fn running_low(&self) {
        self.shared.running_low.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn jobs_are_taken_in_the_order_they_were_added() {
        let ahead = Ahead::default();
        ahead.extend([1, 2]);
        ahead.extend([3]);
        assert_eq!(ahead.len(), 3);
        assert_eq!(ahead.take(), Some(1));
        assert_eq!(ahead.take_for_slot(), Some(2));
        assert_eq!(ahead.drain(), [3]);
        assert!(ahead.is_empty());
        assert_eq!(ahead.take_for_slot(), None);
    }

    #[test]
    fn the_loop_is_woken_once_a_job_taken_leaves_as_few_as_it_asked() {
        let ahead = Ahead::default();
        ahead.extend(1..=4);
        ahead.wake_at(Some(2));
        ahead.take_for_slot();
        assert!(ahead.running_low().now_or_never().is_none(), "3 left");
        ahead.take_for_slot();
        assert!(ahead.running_low().now_or_never().is_some(), "2 left");
        ahead.take_for_slot();
        assert!(ahead.running_low().now_or_never().is_some(), "1 left");
        ahead.take();
        assert!(
            ahead.running_low().now_or_never().is_none(),
            "the loop's own take wakes nobody"
        );
    }

    #[test]
    fn without_a_mark_taking_jobs_wakes_nobody() {
        let ahead = Ahead::default();
        ahead.extend(1..=2);
        ahead.wake_at(Some(5));
        ahead.wake_at(None);
        ahead.take_for_slot();
        ahead.take_for_slot();
        assert!(ahead.running_low().now_or_never().is_none());
    }
}
