//! The scheduler: fires the ticks of the schedules defined in the process, in a worker started
//! with `--schedule`. Each tick is claimed and its job pushed in one script call keyed by the
//! tick's nominal time ([`RedisQueue::fire`]), so any number of workers may run it: each tick
//! fires once between them. It sleeps until the earliest next tick by Redis's clock (the
//! offset to the host's clock is measured at start and every minute), and on start fires the
//! ticks missed while no worker ran, as each schedule's [`Missed`](redjob::schedule::Missed)
//! policy says.

use chrono::{DateTime, Utc};
use redjob::__worker::WorkerQueue;
use redjob::schedule::{Fired, Schedule};
use redjob::RedisQueue;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The last stretch before a tick, waited out by yielding rather than on the timer.
const PRECISE: Duration = Duration::from_millis(2);

/// How often the offset between Redis's clock and the host's is measured again.
const CLOCK_EVERY: Duration = Duration::from_secs(60);

/// How often operators' requests to run a schedule now are looked for.
const RUNS_EVERY: Duration = Duration::from_secs(1);

/// How often the schedules this worker keeps are recorded for the operators' tools.
const KEEP_EVERY: Duration = Duration::from_secs(30);

/// How long to wait before trying again when Redis cannot be reached.
const RETRY: Duration = Duration::from_millis(500);

/// Starts the scheduler for `schedules` on `queue`; it stops when `stop` fires.
pub(crate) fn start(
    queue: RedisQueue,
    schedules: Vec<Schedule>,
    stop: CancellationToken,
) -> Option<JoinHandle<()>> {
    if schedules.is_empty() {
        return None;
    }
    Some(tokio::spawn(async move {
        tokio::select! {
            _ = run(&queue, &schedules) => {}
            _ = stop.cancelled() => {}
        }
    }))
}

async fn run(queue: &RedisQueue, schedules: &[Schedule]) {
    let mut clock = Clock::default();
    // The next tick of each schedule, by schedule index.
    let mut next: BTreeMap<usize, DateTime<Utc>> = BTreeMap::new();
    for (at, schedule) in schedules.iter().enumerate() {
        loop {
            match catch_up(queue, &mut clock, schedule).await {
                Ok(after) => {
                    if let Some(tick) = schedule.when().next_after(after) {
                        next.insert(at, tick);
                    }
                    break;
                }
                Err(err) => {
                    warn!(schedule = schedule.name(), error = %err, "cannot read the schedule's last tick yet; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
    let mut checks = tokio::time::interval(RUNS_EVERY);
    checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut kept_at = tokio::time::Instant::now();
    keep(queue, schedules).await;
    loop {
        let Some((&at, &tick)) = next.iter().min_by_key(|(_, tick)| **tick) else {
            return;
        };
        clock.refresh(queue).await;
        tokio::select! {
            _ = clock.sleep_until(tick) => {}
            _ = checks.tick() => {
                run_requested(queue, schedules).await;
                if kept_at.elapsed() >= KEEP_EVERY {
                    keep(queue, schedules).await;
                    kept_at = tokio::time::Instant::now();
                }
                continue;
            }
        }
        let schedule = &schedules[at];
        match queue.fire(schedule, tick).await {
            Ok(fired) => {
                if let Fired::Pushed(_) = fired {
                    let late = (clock.now() - tick).to_std().unwrap_or_default();
                    crate::prometheus::record_schedule(schedule.name(), late);
                }
                report(schedule, tick, fired);
                match schedule.when().next_after(tick) {
                    Some(following) => next.insert(at, following),
                    None => next.remove(&at),
                };
            }
            Err(err) => {
                warn!(schedule = schedule.name(), error = %err, "cannot fire the tick yet; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Records in Redis that this worker keeps `schedules`, for the operators' tools.
async fn keep(queue: &RedisQueue, schedules: &[Schedule]) {
    if let Err(err) = WorkerQueue::of(queue).keep_schedules(schedules).await {
        warn!(error = %err, "cannot record the schedules this worker keeps");
    }
}

/// Fires the schedules an operator asked to run now (`jobsctl schedule run`) that this worker
/// keeps; a name it does not keep is put back for a worker that does.
async fn run_requested(queue: &RedisQueue, schedules: &[Schedule]) {
    let Ok(Some(name)) = WorkerQueue::of(queue).take_schedule_run().await else {
        return;
    };
    match schedules.iter().find(|s| s.name() == name) {
        Some(schedule) => match WorkerQueue::of(queue).fire_now(schedule).await {
            Ok(uuid) => info!(schedule = %name, %uuid, "SCHEDULED (run by an operator)"),
            Err(err) => warn!(schedule = %name, error = %err, "cannot run the schedule"),
        },
        None => warn!(schedule = %name, "asked to run a schedule this worker does not keep"),
    }
}

/// Fires the ticks of `schedule` missed since its last tick, by its policy; returns the time
/// after which its next tick is due.
async fn catch_up(
    queue: &RedisQueue,
    clock: &mut Clock,
    schedule: &Schedule,
) -> redjob::Result<DateTime<Utc>> {
    clock.refresh(queue).await;
    let now = clock.now();
    let last = WorkerQueue::of(queue).last_tick(schedule).await?;
    for tick in schedule.missed_ticks(last, now) {
        let fired = queue.fire(schedule, tick).await?;
        report(schedule, tick, fired);
    }
    Ok(now)
}

fn report(schedule: &Schedule, tick: DateTime<Utc>, fired: Fired) {
    match fired {
        Fired::Pushed(uuid) => info!(schedule = schedule.name(), %tick, %uuid, "SCHEDULED"),
        Fired::Skipped => info!(
            schedule = schedule.name(),
            %tick,
            "the previous run has not settled; this tick is skipped"
        ),
        Fired::Taken => {}
    }
}

/// Redis's clock, as an offset from the host's.
#[derive(Default)]
struct Clock {
    offset_ms: i64,
    measured: Option<tokio::time::Instant>,
}

impl Clock {
    /// Measures the offset again when it is older than [`CLOCK_EVERY`].
    async fn refresh(&mut self, queue: &RedisQueue) {
        if self.measured.is_some_and(|at| at.elapsed() < CLOCK_EVERY) {
            return;
        }
        let before = Utc::now();
        let time: Result<(i64, i64), _> = queue.query(&redis::cmd("TIME")).await;
        let after = Utc::now();
        if let Ok((seconds, micros)) = time {
            let redis_ms = seconds * 1000 + micros / 1000;
            let host_ms = (before.timestamp_millis() + after.timestamp_millis()) / 2;
            self.offset_ms = redis_ms - host_ms;
            self.measured = Some(tokio::time::Instant::now());
        }
    }

    /// Now, by Redis's clock.
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset_ms)
    }

    /// Sleeps until `tick` by Redis's clock: the timer's last millisecond, which it rounds up,
    /// is waited out by yielding, so the tick fires within microseconds of its time.
    async fn sleep_until(&self, tick: DateTime<Utc>) {
        let wait = (tick - self.now()).to_std().unwrap_or_default();
        if let Some(coarse) = wait.checked_sub(PRECISE) {
            tokio::time::sleep(coarse).await;
        }
        while self.now() < tick {
            tokio::task::yield_now().await;
        }
    }
}
