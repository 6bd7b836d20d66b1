//! Counters the worker keeps about itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What this worker process has done so far.
#[derive(Debug)]
pub struct Stats {
    processed: AtomicU64,
    failed: AtomicU64,
    /// Recent attempts' run time in microseconds, a moving mean weighted toward the latest
    /// ([`NO_RUNTIME`] before the first).
    recent_runtime_us: AtomicU64,
}

/// The recent run time before any attempt ended.
const NO_RUNTIME: u64 = u64::MAX;

impl Default for Stats {
    fn default() -> Self {
        Stats {
            processed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            recent_runtime_us: AtomicU64::new(NO_RUNTIME),
        }
    }
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

    /// Adds the run time of one attempt that ran (decoding, middleware and handler, not
    /// settling) to the recent mean.
    pub(crate) fn record_runtime(&self, runtime: Duration) {
        let sample = u64::try_from(runtime.as_micros()).unwrap_or(NO_RUNTIME - 1);
        // Attempts ending at once may lose one another's sample: an estimate is all it is for.
        let mean = match self.recent_runtime_us.load(Ordering::Relaxed) {
            NO_RUNTIME => sample,
            mean => mean - mean / 8 + sample / 8,
        };
        self.recent_runtime_us.store(mean, Ordering::Relaxed);
    }

    /// The mean run time of recent attempts, weighted toward the latest; `None` before the
    /// first ended.
    pub(crate) fn recent_runtime(&self) -> Option<Duration> {
        match self.recent_runtime_us.load(Ordering::Relaxed) {
            NO_RUNTIME => None,
            mean => Some(Duration::from_micros(mean)),
        }
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
