//! Schedules: jobs dispatched on a cron expression or an interval, by the workers that already
//! run, each tick fired exactly once between them.
//!
//! Every worker started with `--schedule` keeps the schedules defined in its process
//! ([`define`]). Firing a tick is one script call (`schedule_fire.lua`) keyed by the schedule
//! and the tick's nominal time: it claims the tick only if it is later than the last one fired,
//! and pushes the tick's job in the same call, so any number of workers fire each tick once, a
//! late or skewed one loses the claim, and no tick is claimed without its job. The last fired
//! tick is kept in Redis (`jobs:schedule:<name>`), so ticks missed while no worker ran are
//! caught up by the [`Missed`] policy when one starts again. See `docs/schedules.md`.

mod error;
pub(crate) mod fire;
pub(crate) mod offline;
mod when;

pub use error::ScheduleError;
pub use fire::Fired;
pub use when::When;

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use crate::dispatch::{AnyDispatch, PendingDispatch, Placement};
use crate::error::Result;
use crate::job::Job;
use crate::queue::Envelope;

/// What to do with ticks missed while no worker ran the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Fire none of them: the schedule goes on from the next tick.
    Skip,
    /// Fire the latest of them, once (the default).
    RunLast,
    /// Fire all of them, oldest first, but at most this many (the latest ones).
    RunAll {
        /// The most missed ticks fired.
        max: usize,
    },
}

/// A job dispatched on a schedule.
///
/// ```
/// use redjob::schedule::{Missed, Schedule};
/// # use redjob::{job, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct PruneCarts {}
/// # #[job] impl Job for PruneCarts { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # #[derive(Serialize, Deserialize)] struct SendDigest {}
/// # #[job] impl Job for SendDigest { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # fn demo() -> Result<(), redjob::schedule::ScheduleError> {
/// redjob::schedule::define(Schedule::new("prune-carts", PruneCarts {}.dispatch()).cron("0 */5 * * * *")?);
/// redjob::schedule::define(
///     Schedule::new("digest", SendDigest {}.dispatch().on_queue("mail"))
///         .daily_at("08:00")?
///         .zone("Europe/Paris")?
///         .without_overlapping()
///         .missed(Missed::Skip),
/// );
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Schedule {
    name: String,
    job: Arc<dyn AnyDispatch + Sync>,
    job_name: &'static str,
    when: When,
    without_overlapping: bool,
    missed: Missed,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("name", &self.name)
            .field("job", &self.job_name)
            .field("when", &self.when.describe())
            .field("without_overlapping", &self.without_overlapping)
            .field("missed", &self.missed)
            .finish()
    }
}

impl Schedule {
    /// The schedule `name` dispatching `job` (its queue, tries and other options as the
    /// dispatch says) every minute until told otherwise.
    pub fn new<J: Job>(name: impl Into<String>, job: PendingDispatch<J>) -> Schedule {
        Schedule {
            name: name.into(),
            job: Arc::new(job),
            job_name: J::NAME,
            when: When::Every(Duration::from_secs(60)),
            without_overlapping: false,
            missed: Missed::RunLast,
        }
    }

    /// Fires on a cron expression: five fields, or six with seconds first.
    pub fn cron(mut self, expression: &str) -> std::result::Result<Schedule, ScheduleError> {
        self.when = When::cron(expression)?;
        Ok(self)
    }

    /// Fires every `interval`, counted from the Unix epoch (every 10 s fires at :00, :10, ...).
    pub fn every(mut self, interval: Duration) -> Schedule {
        self.when = When::Every(interval.max(Duration::from_secs(1)));
        self
    }

    /// Fires every second.
    pub fn every_second(self) -> Schedule {
        self.every(Duration::from_secs(1))
    }

    /// Fires every minute, at second 0.
    pub fn every_minute(self) -> Schedule {
        self.every(Duration::from_secs(60))
    }

    /// Fires every hour at `minute`.
    pub fn hourly_at(self, minute: u32) -> std::result::Result<Schedule, ScheduleError> {
        self.cron(&format!("0 {minute} * * * *"))
    }

    /// Fires every day at `time` (`HH:MM` or `HH:MM:SS`, in the schedule's zone).
    pub fn daily_at(self, time: &str) -> std::result::Result<Schedule, ScheduleError> {
        let (h, m, s) = time_of_day(time)?;
        self.cron(&format!("{s} {m} {h} * * *"))
    }

    /// Fires Monday to Friday at `time`.
    pub fn weekdays_at(self, time: &str) -> std::result::Result<Schedule, ScheduleError> {
        let (h, m, s) = time_of_day(time)?;
        self.cron(&format!("{s} {m} {h} * * 1-5"))
    }

    /// Reads the cron expression's times in the zone `name` (`"Europe/Paris"`); UTC by default.
    pub fn zone(mut self, name: &str) -> std::result::Result<Schedule, ScheduleError> {
        let zone: chrono_tz::Tz = name
            .parse()
            .map_err(|_| ScheduleError::UnknownZone(name.to_owned()))?;
        self.when = self.when.in_zone(zone);
        Ok(self)
    }

    /// Skips a tick while the job of the previous one has not settled (done or failed for
    /// good): a lock taken with the push and freed by the job's settle.
    pub fn without_overlapping(mut self) -> Schedule {
        self.without_overlapping = true;
        self
    }

    /// What to do with the ticks missed while no worker ran (default: [`Missed::RunLast`]).
    pub fn missed(mut self, missed: Missed) -> Schedule {
        self.missed = missed;
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// When it fires.
    pub fn when(&self) -> &When {
        &self.when
    }

    /// Its policy for missed ticks.
    pub fn missed_policy(&self) -> Missed {
        self.missed
    }

    /// The ticks missed between the last tick fired (`None`: never) and `now`, to fire when a
    /// worker starts keeping the schedule, by its [`Missed`] policy, oldest first. A schedule
    /// never fired starts with its next tick.
    pub fn missed_ticks(
        &self,
        last: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        let Some(last) = last else {
            return Vec::new();
        };
        let wanted = match self.missed {
            Missed::Skip => return Vec::new(),
            Missed::RunLast => 1,
            Missed::RunAll { max } => max.max(1),
        };
        // The latest `wanted` of them, read from the newest backwards.
        let mut ticks = Vec::with_capacity(wanted);
        // `now` itself, when it is a tick, counts.
        let mut at = now + chrono::Duration::milliseconds(1);
        while ticks.len() < wanted {
            match self.when.previous_before(at) {
                Some(tick) if tick > last => {
                    ticks.push(tick);
                    at = tick;
                }
                _ => break,
            }
        }
        ticks.reverse();
        ticks
    }

    /// The job of the tick `tick`: its uuid derived from the schedule's name and the tick, so
    /// every worker builds the same one.
    pub(crate) fn envelope(&self, tick: DateTime<Utc>) -> Result<Envelope> {
        self.job.envelope_in(&Placement {
            uuid: Some(tick_uuid(&self.name, tick)),
            untraced: true,
            ..Placement::default()
        })
    }

    pub(crate) fn overlaps_guarded(&self) -> bool {
        self.without_overlapping
    }
}

/// The uuid of the job of the schedule `name`'s tick `tick`: a v5 uuid of both, the same in
/// every process, so a tick's job can be found by its tick.
pub fn tick_uuid(name: &str, tick: DateTime<Utc>) -> uuid::Uuid {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("jobs-schedule:{name}:{}", tick.timestamp_millis()).as_bytes(),
    )
}

fn time_of_day(time: &str) -> std::result::Result<(u32, u32, u32), ScheduleError> {
    let invalid = || ScheduleError::InvalidTime(time.to_owned());
    let parts: Vec<u32> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| invalid()))
        .collect::<std::result::Result<_, _>>()?;
    match parts[..] {
        [h, m] if h < 24 && m < 60 => Ok((h, m, 0)),
        [h, m, s] if h < 24 && m < 60 && s < 60 => Ok((h, m, s)),
        _ => Err(invalid()),
    }
}

fn registry() -> &'static RwLock<BTreeMap<String, Schedule>> {
    static SCHEDULES: OnceLock<RwLock<BTreeMap<String, Schedule>>> = OnceLock::new();
    SCHEDULES.get_or_init(RwLock::default)
}

/// Defines a schedule, kept by every worker of this process started with `--schedule`; a second
/// definition under the same name replaces the first. Define them at startup.
pub fn define(schedule: Schedule) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(schedule.name.clone(), schedule);
}

/// The schedules defined in this process, by name.
pub fn defined() -> Vec<Schedule> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect()
}
