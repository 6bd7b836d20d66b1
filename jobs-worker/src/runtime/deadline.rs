//! A running handler's deadline, which the lease registry keeps and the watchdog reads; its
//! attempt, whose context's cancellation the worker fires.

use redjob::__worker::AttemptHooks;
use std::time::{Duration, Instant};

use super::rules::Limits;

/// A running handler's deadline, with what the watchdog needs to apply the timeout rules.
pub(crate) struct Deadline {
    /// When the handler started.
    pub(crate) started: Instant,
    /// How long it may run (`None`: no limit).
    pub(crate) timeout: Option<Duration>,
    /// Its attempt's hooks, with its context, whose release or fail request the timeout rules
    /// honour.
    pub(crate) attempt: AttemptHooks,
    /// The attempt rules that apply to it.
    pub(crate) limits: Limits,
    /// The job's display name, for the timeout message.
    pub(crate) display_name: String,
}

impl Deadline {
    /// A handler starting now, which must finish within `timeout`, if it has one.
    pub(crate) fn new(
        timeout: Option<Duration>,
        attempt: AttemptHooks,
        limits: Limits,
        display_name: &str,
    ) -> Deadline {
        Deadline {
            started: Instant::now(),
            timeout,
            attempt,
            limits,
            display_name: display_name.to_owned(),
        }
    }

    /// When the handler's timeout is up, if it has one.
    pub(crate) fn at(&self) -> Option<Instant> {
        Some(self.started + self.timeout?)
    }
}
