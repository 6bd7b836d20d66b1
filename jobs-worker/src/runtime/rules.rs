//! Laravel's attempt and failure rules, as pure functions of a job's state.

use redjob::Backoff;
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
    /// Unix time until which the job is retried, tries not counted (Laravel's `retryUntil`).
    pub retry_until: Option<i64>,
    /// Failed attempts after which the job fails, and how many it has had before this one.
    pub max_exceptions: Option<u32>,
    /// Attempts of the job that ended in an error, a panic or a timeout before this one.
    pub exceptions: u32,
    /// Times a stopping worker put the job back before this attempt, and how many the worker
    /// allows (0: no limit).
    pub interruptions: (u32, u32),
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
    /// Run again after the delay, after a failed attempt: counted as an exception.
    Retry(Duration),
    /// Run again after the delay without counting the attempt.
    Requeue(Duration),
    /// Run again at once without counting the attempt: the worker is stopping.
    Interrupt,
    /// This worker cannot run it (a type it does not link, data it cannot decode), for this
    /// reason: run again, on a worker that can, without counting the attempt.
    Unrunnable(String),
    /// Settled as done without running (a middleware skipped it).
    Skip,
    /// Record in the failed-job store with this reason.
    Fail(String),
}

/// How long a job this worker cannot run waits before it is offered to a worker again: long
/// enough that workers that cannot run it do not pass it between them without pause, short
/// enough that one that can takes it soon.
pub(crate) const UNRUNNABLE_RETRY: Duration = Duration::from_secs(5);

/// A job this worker cannot run, for `reason`, that a worker first met at Unix time `since`
/// (0: now, at `now`): it waits for a worker that can run it, its attempt given back, until
/// `grace` has passed since then, and then fails (at once with no grace).
pub(crate) fn on_unrunnable(reason: String, since: u32, grace: Duration, now: i64) -> Verdict {
    let waited = match since {
        0 => Duration::ZERO,
        since => Duration::from_secs(u64::try_from(now - i64::from(since)).unwrap_or(0)),
    };
    match (grace.is_zero(), waited < grace) {
        (true, _) => Verdict::Fail(reason),
        (false, true) => Verdict::Unrunnable(reason),
        (false, false) => Verdict::Fail(format!(
            "{reason} (no worker that can run it took it within --unknown-job-grace {}s)",
            grace.as_secs()
        )),
    }
}

impl Limits {
    /// When the worker stops with the job running (or the handler, seeing it stop, asks to be
    /// put back): the job goes back with its attempt given back, unless it was interrupted as
    /// often as the worker allows, when it fails, so that it cannot come back forever unseen.
    pub(crate) fn on_interrupt(&self, display_name: &str) -> Verdict {
        let (before, allowed) = self.interruptions;
        if allowed == 0 || before < allowed {
            return Verdict::Interrupt;
        }
        Verdict::Fail(format!(
            "{display_name} was interrupted by a stopping worker {} times (--max-interruptions {allowed}).",
            before + 1
        ))
    }

    /// Before running, at Unix time `now`: a job reserved more often than its tries allow
    /// fails unrun (crashes, timeouts and releases all use attempts); with `retry_until`,
    /// tries are not counted, and a job reserved after that time fails unrun.
    pub(crate) fn check_before_run(
        &self,
        display_name: &str,
        attempt: u32,
        now: i64,
    ) -> Option<Verdict> {
        let out_of_attempts = match self.retry_until {
            Some(until) => now > until,
            None => self.max_tries > 0 && attempt > self.max_tries,
        };
        out_of_attempts
            .then(|| Verdict::Fail(format!("{display_name} has been attempted too many times.")))
    }

    /// After a failed attempt at Unix time `now`: fail on the last attempt (with
    /// `retry_until`, once that time has come), on the `max_exceptions`th failed attempt, or
    /// on a timeout with `fail_on_timeout`; otherwise retry after `backoff[attempt - 1]`.
    pub(crate) fn after_error(
        &self,
        display_name: &str,
        attempt: u32,
        error: &AttemptError,
        now: i64,
    ) -> Verdict {
        let last_attempt = match self.retry_until {
            Some(until) => until <= now,
            None => self.max_tries > 0 && attempt >= self.max_tries,
        };
        let too_many_exceptions = self
            .max_exceptions
            .is_some_and(|max| self.exceptions + 1 >= max);
        match error {
            AttemptError::Timeout
                if last_attempt || self.fail_on_timeout || too_many_exceptions =>
            {
                Verdict::Fail(format!("{display_name} has timed out."))
            }
            AttemptError::Error(_) | AttemptError::Panic(_)
                if last_attempt || too_many_exceptions =>
            {
                Verdict::Fail(error.describe(display_name))
            }
            _ => Verdict::Retry(Duration::from_secs(self.backoff.after_attempt(attempt))),
        }
    }
}

impl AttemptError {
    /// What went wrong, in a word: `error`, `panic` or `timeout`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            AttemptError::Error(_) => "error",
            AttemptError::Panic(_) => "panic",
            AttemptError::Timeout => "timeout",
        }
    }

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
            retry_until: None,
            max_exceptions: None,
            exceptions: 0,
            interruptions: (0, 10),
        }
    }

    #[test]
    fn an_unrunnable_job_waits_for_the_grace_from_when_a_worker_first_met_it() {
        let grace = Duration::from_secs(600);
        let reason = || "unknown job type".to_owned();
        assert_eq!(
            on_unrunnable(reason(), 0, grace, 10_000),
            Verdict::Unrunnable(reason())
        );
        assert_eq!(
            on_unrunnable(reason(), 10_000, grace, 10_599),
            Verdict::Unrunnable(reason())
        );
        assert_eq!(
            on_unrunnable(reason(), 10_000, grace, 10_600),
            Verdict::Fail(
                "unknown job type (no worker that can run it took it within --unknown-job-grace 600s)"
                    .into()
            )
        );
        assert_eq!(
            on_unrunnable(reason(), 0, Duration::ZERO, 10_000),
            Verdict::Fail(reason()),
            "no grace: it fails at once, for its reason alone"
        );
    }

    #[test]
    fn an_interrupted_job_goes_back_until_the_worker_allows_no_more() {
        let mut limits = limits(1, &[]);
        assert_eq!(limits.on_interrupt("J"), Verdict::Interrupt);
        limits.interruptions = (9, 10);
        assert_eq!(limits.on_interrupt("J"), Verdict::Interrupt);
        limits.interruptions = (10, 10);
        assert_eq!(
            limits.on_interrupt("J"),
            Verdict::Fail(
                "J was interrupted by a stopping worker 11 times (--max-interruptions 10).".into()
            )
        );
        limits.interruptions = (1_000, 0);
        assert_eq!(limits.on_interrupt("J"), Verdict::Interrupt);
    }

    #[test]
    fn releases_with_backoff_until_the_last_attempt() {
        let l = limits(3, &[1, 5]);
        let err = AttemptError::Error("boom".into());
        assert_eq!(
            l.after_error("J", 1, &err, 0),
            Verdict::Retry(Duration::from_secs(1))
        );
        assert_eq!(
            l.after_error("J", 2, &err, 0),
            Verdict::Retry(Duration::from_secs(5))
        );
        assert_eq!(l.after_error("J", 3, &err, 0), Verdict::Fail("boom".into()));
    }

    #[test]
    fn unlimited_tries_never_fail_and_the_last_backoff_repeats() {
        let l = limits(0, &[1, 5, 10]);
        let err = AttemptError::Panic("p".into());
        assert_eq!(
            l.after_error("J", 9, &err, 0),
            Verdict::Retry(Duration::from_secs(10))
        );
        assert_eq!(l.check_before_run("J", 1000, 0), None);
    }

    #[test]
    fn a_panic_on_the_last_attempt_fails_saying_it_panicked() {
        let l = limits(1, &[]);
        let err = AttemptError::Panic("p".into());
        assert_eq!(
            l.after_error("J", 1, &err, 0),
            Verdict::Fail("panicked: p".into())
        );
    }

    #[test]
    fn too_many_attempts_fail_before_running() {
        let l = limits(2, &[]);
        assert_eq!(l.check_before_run("J", 2, 0), None);
        assert_eq!(
            l.check_before_run("J", 3, 0),
            Some(Verdict::Fail("J has been attempted too many times.".into()))
        );
    }

    #[test]
    fn retry_until_replaces_tries_and_max_exceptions_counts_failed_attempts() {
        let mut l = limits(1, &[3]);
        l.retry_until = Some(100);
        let err = AttemptError::Error("boom".into());
        assert_eq!(
            l.check_before_run("J", 50, 100),
            None,
            "tries are not counted"
        );
        assert!(matches!(
            l.check_before_run("J", 2, 101),
            Some(Verdict::Fail(_))
        ));
        assert_eq!(
            l.after_error("J", 7, &err, 99),
            Verdict::Retry(Duration::from_secs(3))
        );
        assert_eq!(
            l.after_error("J", 7, &err, 100),
            Verdict::Fail("boom".into())
        );

        let mut l = limits(0, &[1]);
        l.max_exceptions = Some(3);
        l.exceptions = 1;
        assert_eq!(
            l.after_error("J", 5, &err, 0),
            Verdict::Retry(Duration::from_secs(1))
        );
        l.exceptions = 2;
        assert_eq!(l.after_error("J", 6, &err, 0), Verdict::Fail("boom".into()));
        assert_eq!(
            l.after_error("J", 6, &AttemptError::Timeout, 0),
            Verdict::Fail("J has timed out.".into())
        );
    }

    #[test]
    fn timeouts_fail_on_the_last_attempt_or_with_fail_on_timeout() {
        let mut l = limits(2, &[4]);
        let t = AttemptError::Timeout;
        assert_eq!(
            l.after_error("J", 1, &t, 0),
            Verdict::Retry(Duration::from_secs(4))
        );
        assert_eq!(
            l.after_error("J", 2, &t, 0),
            Verdict::Fail("J has timed out.".into())
        );
        l.fail_on_timeout = true;
        assert_eq!(
            l.after_error("J", 1, &t, 0),
            Verdict::Fail("J has timed out.".into())
        );
    }
}
