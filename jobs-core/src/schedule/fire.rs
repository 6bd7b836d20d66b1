//! Firing a schedule's tick: one script call that claims it and pushes its job.

use chrono::{DateTime, Utc};
use std::time::Duration;
use uuid::Uuid;

use super::Schedule;
use crate::error::Result;
use crate::payload::unique::{UniqueLock, UniqueUntil};
use crate::payload::Payload;
use crate::queue::{scripts, RedisQueue, WorkerQueue};

/// How long a schedule's overlap lock lasts at most: a job that never settles (lost by hand)
/// blocks its schedule no longer than this.
const OVERLAP_LOCK: Duration = Duration::from_secs(24 * 3600);

/// What firing a tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fired {
    /// Its job was pushed, with this uuid.
    Pushed(Uuid),
    /// It was claimed but its job skipped: the job of an earlier tick has not settled.
    Skipped,
    /// It (or a later tick) was fired already, by this worker or another.
    Taken,
}

impl RedisQueue {
    /// Fires the tick `tick` of `schedule`: claims it, if no tick as late was fired, and pushes
    /// its job, in one step.
    pub async fn fire(&self, schedule: &Schedule, tick: DateTime<Utc>) -> Result<Fired> {
        let mut envelope = schedule.envelope(tick)?;
        let lock_key = format!("schedule:{}", schedule.name());
        if schedule.overlaps_guarded() {
            // The job carries the lock as a unique job does, so its settle frees it.
            if let Ok(mut payload) = Payload::from_json(&envelope.payload) {
                payload.unique = Some(UniqueLock {
                    key: lock_key.clone(),
                    until: UniqueUntil::Done,
                    lasts: OVERLAP_LOCK.as_secs(),
                });
                envelope.payload = payload.to_json();
            }
        }
        let envelope = self.seal_one(envelope)?;
        let lock = self.keys().unique(&envelope.queue, &lock_key);
        if self.is_offline() {
            let overlap_lock = schedule
                .overlaps_guarded()
                .then(|| (lock.clone(), OVERLAP_LOCK));
            let name = schedule.name();
            if let Some(fired) = self.fire_offline(name, tick, &envelope, overlap_lock).await {
                return Ok(fired);
            }
        }
        let queue = self
            .queue_keys(&envelope.queue)
            .in_group(envelope.group.as_deref());
        let state = self.keys().schedule(&envelope.queue, schedule.name());
        let mut call = scripts::SCHEDULE_FIRE.key(&state);
        call.key(&queue.ready)
            .key(&queue.notify)
            .key(if schedule.overlaps_guarded() {
                &lock
            } else {
                &state
            })
            .arg(tick.timestamp_millis())
            .arg(&envelope.payload)
            .arg(envelope.uuid.to_string())
            .arg(schedule.when().describe())
            .arg(match schedule.overlaps_guarded() {
                true => OVERLAP_LOCK.as_millis().to_string(),
                false => String::new(),
            })
            .arg(envelope.group.as_deref().unwrap_or(""));
        let fired: u64 = self.invoke(&call).await?;
        Ok(match fired {
            1 => Fired::Pushed(envelope.uuid),
            2 => Fired::Skipped,
            _ => Fired::Taken,
        })
    }
}

impl WorkerQueue<'_> {
    /// Pushes `schedule`'s job now, outside its ticks (an operator's `jobsctl schedule run`):
    /// a job of its own uuid, which claims no tick and takes no overlap lock.
    pub async fn fire_now(&self, schedule: &Schedule) -> Result<Uuid> {
        let mut envelope = schedule.envelope(Utc::now())?;
        envelope.uuid = Uuid::new_v4();
        if let Ok(mut payload) = Payload::from_json(&envelope.payload) {
            payload.uuid = envelope.uuid;
            payload.id = envelope.uuid.simple().to_string();
            envelope.payload = payload.to_json();
        }
        self.handle
            .push_all(std::slice::from_ref(&envelope))
            .await?;
        Ok(envelope.uuid)
    }

    /// Records that this process keeps `schedules`: each one's description, queue and next
    /// tick in its state, and its name in the index of schedules, scored by Redis's time now,
    /// so that operators see which are kept and which went stale.
    pub async fn keep_schedules(&self, schedules: &[Schedule]) -> Result<()> {
        let mut conn = self.handle.connection();
        let (seconds, micros): (i64, i64) = self
            .handle
            .timed(redis::cmd("TIME").query_async(&mut conn))
            .await?;
        let now_ms = seconds * 1000 + micros / 1000;
        let now = DateTime::from_timestamp_millis(now_ms).unwrap_or_else(Utc::now);
        // Each schedule's state is in its queue's slot on a cluster; the index, and the queue
        // of each name that operators' tools find the state by, are in slots of their own.
        let mut writes = Vec::with_capacity(3 * schedules.len());
        for schedule in schedules {
            let queue = schedule.envelope(now)?.queue;
            let state = self.handle.keys().schedule(&queue, schedule.name());
            let next = schedule
                .when()
                .next_after(now)
                .map_or(String::new(), |tick| tick.timestamp_millis().to_string());
            let record = [
                ("when", schedule.when().describe()),
                ("queue", queue.clone()),
                ("next_tick", next),
                ("seen_at", now_ms.to_string()),
            ];
            writes.push(redis::cmd("HSET").arg(&state).arg(&record[..]).clone());
            writes.push(
                redis::cmd("ZADD")
                    .arg(self.handle.keys().schedules())
                    .arg(now_ms)
                    .arg(schedule.name())
                    .clone(),
            );
            writes.push(
                redis::cmd("HSET")
                    .arg(self.handle.keys().schedule_queues())
                    .arg(schedule.name())
                    .arg(queue)
                    .clone(),
            );
        }
        let _: () = self.handle.query_each(&writes).await?;
        Ok(())
    }

    /// Takes one name an operator asked to fire now, if any.
    pub async fn take_schedule_run(&self) -> Result<Option<String>> {
        let mut conn = self.handle.connection();
        self.handle
            .timed(redis::AsyncCommands::lpop(
                &mut conn,
                self.handle.keys().schedule_runs(),
                None,
            ))
            .await
    }

    /// The last tick of `schedule` fired (or skipped), if any.
    pub async fn last_tick(&self, schedule: &Schedule) -> Result<Option<DateTime<Utc>>> {
        let queue = schedule.envelope(Utc::now())?.queue;
        let state = self.handle.keys().schedule(&queue, schedule.name());
        let last: Option<i64> = self
            .handle
            .query(redis::cmd("HGET").arg(state).arg("last_tick"))
            .await?;
        Ok(last.and_then(DateTime::from_timestamp_millis))
    }
}
