//! Why a worker stopped, and the process exit status that says so.

/// Why a worker stopped; [`Exit::code`] is its process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A stop was requested (SIGTERM, SIGINT, or [`Worker::stop_token`](crate::Worker::stop_token)).
    Stopped,
    /// `--stop-when-empty`: the queues are empty and no job is running.
    Empty,
    /// `--once` or `--max-jobs`: the job count was reached.
    MaxJobs,
    /// `--max-time`: the time was up.
    MaxTime,
    /// `--memory`: the process grew past the limit.
    MemoryExceeded,
    /// A restart was requested (`jobsctl restart`) after the worker started.
    Restart,
}

impl Exit {
    /// The process exit status: 12 for `MemoryExceeded` (as in Laravel), 0 otherwise.
    pub fn code(self) -> u8 {
        match self {
            Exit::MemoryExceeded => 12,
            _ => 0,
        }
    }
}
