//! The example schedules, kept by `cargo run --bin worker -- --schedule`: a heartbeat every ten
//! seconds and a nightly report in Paris time, each a `Step` that records when it ran.

use redjob::schedule::{self, Missed, Schedule};

use std::time::Duration;

use crate::Step;

/// Defines the example schedules (call it before the worker starts).
pub fn define_schedules() -> Result<(), schedule::ScheduleError> {
    schedule::define(
        Schedule::new("heartbeat", Step::new("heartbeat").dispatch())
            .every(Duration::from_secs(10))
            .missed(Missed::Skip),
    );
    schedule::define(
        Schedule::new(
            "nightly-report",
            Step::new("nightly report").dispatch().on_queue("reports"),
        )
        .daily_at("03:00")?
        .zone("Europe/Paris")?
        .without_overlapping(),
    );
    Ok(())
}
