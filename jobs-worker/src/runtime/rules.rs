//! Laravel's attempt and failure rules, as pure functions of a job's state.

use jobs_core::Backoff;
use std::time::Duration;

/// The limits that apply to one job: its own options, else the worker's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limits {
    /// Attempts allowed (0: unlimited).
    pub max_tries: u32,
    /// Seconds before each retry.
    pub backoff: Backoff,
    /// Longest run of one attempt (`None`: no limit).
    pub timeout: Option<Duration>,
    /// A timeout fails the job at once.
    pub fail_on_timeout: bool,
    /// The job has been requeued fewer times than the worker allows: another requeue costs
    /// no attempt.
    pub may_requeue: bool,
}

/// How an attempt went wrong.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AttemptError {
    /// The handler returned an error.
    Error(String),
    /// The handler panicked.
    Panic(String),
    /// The handler ran past its timeout.
    Timeout,
}

/// What becomes of a job after an attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Finished: delete the reservation.
    Done,
    /// Run again after the delay.
    Release(Duration),
    /// Run again after the delay without counting the attempt.
    Requeue(Duration),
    /// Settled as done without running (a middleware skipped it).
    Skip,
    /// Record in the failed-job store with this reason.
    Fail(String),
}

impl Limits {
    /// Before running: a job reserved more often than its tries allow fails unrun (crashes,
    /// timeouts and releases all use attempts).
    pub(crate) fn check_before_run(&self, display_name: &str, attempt: u32) -> Option<Verdict> {
        (self.max_tries > 0 && attempt > self.max_tries)
            .then(|| Verdict::Fail(format!("{display_name} has been attempted too many times.")))
    }

    /// After a failed attempt: fail on the last attempt (or on a timeout with
    /// `fail_on_timeout`), otherwise release after `backoff[attempt - 1]`.
    pub(crate) fn after_error(
        &self,
        display_name: &str,
        attempt: u32,
        error: &AttemptError,
    ) -> Verdict {
        let last_attempt = self.max_tries > 0 && attempt >= self.max_tries;
        match error {
            AttemptError::Timeout if last_attempt || self.fail_on_timeout => {
                Verdict::Fail(format!("{display_name} has timed out."))
            }
            AttemptError::Error(_) | AttemptError::Panic(_) if last_attempt => {
                Verdict::Fail(error.describe(display_name))
            }
            _ => Verdict::Release(Duration::from_secs(self.backoff.after_attempt(attempt))),
        }
    }
}

impl AttemptError {
    /// How the attempt's failure reads in logs.
    pub(crate) fn describe(&self, display_name: &str) -> String {
        match self {
            AttemptError::Error(message) => message.clone(),
            AttemptError::Panic(message) => format!("panicked: {message}"),
            AttemptError::Timeout => format!("{display_name} has timed out."),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_tries: u32, backoff: &[u64]) -> Limits {
        Limits {
            max_tries,
            backoff: Backoff::new(backoff),
            timeout: None,
            fail_on_timeout: false,
            may_requeue: true,
        }
    }

    #[test]
    fn releases_with_backoff_until_the_last_attempt() {
        let l = limits(3, &[1, 5]);
        let err = AttemptError::Error("boom".into());
        assert_eq!(
            l.after_error("J", 1, &err),
            Verdict::Release(Duration::from_secs(1))
        );
        assert_eq!(
            l.after_error("J", 2, &err),
            Verdict::Release(Duration::from_secs(5))
        );
        assert_eq!(l.after_error("J", 3, &err), Verdict::Fail("boom".into()));
    }

    #[test]
    fn unlimited_tries_never_fail_and_the_last_backoff_repeats() {
        let l = limits(0, &[1, 5, 10]);
        let err = AttemptError::Panic("p".into());
        assert_eq!(
            l.after_error("J", 9, &err),
            Verdict::Release(Duration::from_secs(10))
        );
        assert_eq!(l.check_before_run("J", 1000), None);
    }

    #[test]
    fn a_panic_on_the_last_attempt_fails_saying_it_panicked() {
        let l = limits(1, &[]);
        let err = AttemptError::Panic("p".into());
        assert_eq!(
            l.after_error("J", 1, &err),
            Verdict::Fail("panicked: p".into())
        );
    }

    #[test]
    fn too_many_attempts_fail_before_running() {
        let l = limits(2, &[]);
        assert_eq!(l.check_before_run("J", 2), None);
        assert_eq!(
            l.check_before_run("J", 3),
            Some(Verdict::Fail("J has been attempted too many times.".into()))
        );
    }

    #[test]
    fn timeouts_fail_on_the_last_attempt_or_with_fail_on_timeout() {
        let mut l = limits(2, &[4]);
        let t = AttemptError::Timeout;
        assert_eq!(
            l.after_error("J", 1, &t),
            Verdict::Release(Duration::from_secs(4))
        );
        assert_eq!(
            l.after_error("J", 2, &t),
            Verdict::Fail("J has timed out.".into())
        );
        l.fail_on_timeout = true;
        assert_eq!(
            l.after_error("J", 1, &t),
            Verdict::Fail("J has timed out.".into())
        );
    }
}
