//! Schedules: listing those the workers keep, with their next and last ticks, and asking a
//! worker to run one now.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

use super::{Admin, AdminError};

/// A schedule whose workers have not said they keep it for this long is stale: removed from
/// the code, or no worker runs with `--schedule`.
pub const STALE_AFTER: Duration = Duration::from_secs(90);

/// A schedule as the workers that keep it record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// How it is written: a cron expression and its zone, or an interval.
    pub when: String,
    /// The queue its jobs go to.
    pub queue: String,
    /// Its next tick, as a worker last computed it.
    pub next_tick: Option<DateTime<Utc>>,
    /// The last tick fired or skipped.
    pub last_tick: Option<DateTime<Utc>>,
    /// What became of it: `pushed`, or `skipped` (the previous run had not settled).
    pub last_outcome: Option<String>,
    /// When a worker last said it keeps the schedule.
    pub seen_at: Option<DateTime<Utc>>,
    /// No worker has said so for [`STALE_AFTER`].
    pub stale: bool,
}

impl Admin {
    /// The schedules workers keep or kept, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>, AdminError> {
        let keys = self.queue.keys();
        let mut conn = self.queue.connection();
        let names: Vec<String> = self
            .queue
            .timed(redis::AsyncCommands::zrange(
                &mut conn,
                keys.schedules(),
                0,
                -1,
            ))
            .await?;
        let (seconds, _): (i64, i64) = self
            .queue
            .timed(redis::cmd("TIME").query_async(&mut conn))
            .await?;
        let queues: HashMap<String, String> = self
            .queue
            .timed(redis::AsyncCommands::hgetall(
                &mut conn,
                keys.schedule_queues(),
            ))
            .await?;
        let reads: Vec<redis::Cmd> = names
            .iter()
            .map(|name| {
                let queue = queues.get(name).map_or("", String::as_str);
                redis::cmd("HGETALL")
                    .arg(keys.schedule(queue, name))
                    .clone()
            })
            .collect();
        let states: Vec<HashMap<String, String>> = self.queue.query_each(&reads).await?;
        let mut schedules = Vec::with_capacity(names.len());
        for (name, state) in names.into_iter().zip(states) {
            let time = |field: &str| {
                state
                    .get(field)
                    .and_then(|v| v.parse().ok())
                    .and_then(DateTime::from_timestamp_millis)
            };
            let seen_at = time("seen_at");
            let stale =
                seen_at.is_none_or(|at| seconds - at.timestamp() > STALE_AFTER.as_secs() as i64);
            schedules.push(ScheduleInfo {
                when: state.get("when").cloned().unwrap_or_default(),
                queue: state.get("queue").cloned().unwrap_or_default(),
                next_tick: time("next_tick"),
                last_tick: time("last_tick"),
                last_outcome: state.get("last_outcome").cloned(),
                seen_at,
                stale,
                name,
            });
        }
        Ok(schedules)
    }

    /// Asks a worker that keeps the schedule `name` to push its job now, and waits up to
    /// `wait` for one to take the request. Fails with [`AdminError::ScheduleNotFound`] for a
    /// schedule no worker keeps, or none took the request in time.
    pub async fn run_schedule(&self, name: &str, wait: Duration) -> Result<(), AdminError> {
        let known = self.schedules().await?;
        if !known.iter().any(|s| s.name == name && !s.stale) {
            return Err(AdminError::ScheduleNotFound(name.to_owned()));
        }
        let runs = self.queue.keys().schedule_runs();
        let mut conn = self.queue.connection();
        self.queue
            .timed(redis::AsyncCommands::rpush::<_, _, ()>(
                &mut conn, &runs, name,
            ))
            .await?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let waiting: Vec<String> = self
                .queue
                .timed(redis::AsyncCommands::lrange(&mut conn, &runs, 0, -1))
                .await?;
            if !waiting.iter().any(|n| n == name) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                self.queue
                    .timed(redis::AsyncCommands::lrem::<_, _, ()>(
                        &mut conn, &runs, 1, name,
                    ))
                    .await?;
                return Err(AdminError::ScheduleNotFound(name.to_owned()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
