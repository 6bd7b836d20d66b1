//! Counters the worker keeps about itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// What this worker process has done so far.
#[derive(Debug, Default)]
pub struct Stats {
    processed: AtomicU64,
    failed: AtomicU64,
}

impl Stats {
    /// Counts a job that was processed, whatever its outcome.
    pub fn record_processed(&self) {
        self.processed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a job that went to the failed-job store.
    pub fn record_failure(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Jobs processed so far.
    pub fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }

    /// Jobs failed so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}
