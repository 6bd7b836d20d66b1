//! Which queues have their events on (`jobs:events`: queue name -> the length its stream is
//! kept at), as a handle knows it: read from Redis at most once a second, and kept in the
//! handle's extensions, shared by its clones. A process notices an operator's switch within
//! a second; a queue with events off costs its jobs nothing but this read, which a handle
//! that dispatches at least every half second makes in the background.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::queue::handle::RedisQueue;

/// How old a handle's knowledge of the switched-on queues may be.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// From this age on, a push reads the switch again in the background and goes by what it
/// knows, still fresh: only a push that finds it stale waits for the read.
const REFRESH_AFTER: Duration = Duration::from_millis(500);

/// The queues with their events on, as last read.
#[derive(Debug, Default)]
pub(crate) struct EventsOn {
    read: RwLock<Option<(Instant, HashMap<String, u64>)>>,
    /// A read in the background is under way.
    refreshing: AtomicBool,
}

impl EventsOn {
    /// How long ago the switch was read; `None` when it never was.
    fn age(&self) -> Option<Duration> {
        let read = self.read.read().unwrap_or_else(|e| e.into_inner());
        read.as_ref().map(|(at, _)| at.elapsed())
    }

    fn maxlen(&self, queue: &str) -> Option<u64> {
        let read = self.read.read().unwrap_or_else(|e| e.into_inner());
        read.as_ref()?.1.get(queue).copied()
    }

    fn store(&self, on: HashMap<String, u64>) {
        *self.read.write().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), on));
    }
}

impl RedisQueue {
    /// The length the events stream of `queue` is kept at, when its events are on, as this
    /// handle last read it (at most a second ago, when [`RedisQueue::events_switch`] is
    /// called that often); `None` when they are off or were never read.
    pub fn events_maxlen(&self, queue: &str) -> Option<u64> {
        self.extensions().get::<EventsOn>()?.maxlen(queue)
    }

    /// Reads which queues have their events on, unless this handle read it less than a
    /// second ago; an offline handle has none. Pushes call it; a worker calls it once a
    /// second, for the jobs it runs. A switch this user may not read (an ACL user without
    /// `jobs:*`) reads as every queue's events off until the next read: a dispatch never
    /// fails for it. Redis unreachable or too slow is an error, which a push would meet next.
    ///
    /// Read more than half a second ago, it is read again in the background, and this call
    /// returns at once: a handle used that often never waits for the read.
    pub async fn events_switch(&self) -> Result<()> {
        if self.is_offline() {
            return Ok(());
        }
        let on = self.extensions().get_or_insert_with(EventsOn::default);
        match on.age() {
            Some(age) if age < REFRESH_AFTER => Ok(()),
            Some(age) if age < FRESH => {
                self.read_events_switch_behind(on);
                Ok(())
            }
            _ => self.read_events_switch(&on).await,
        }
    }

    /// Reads the switch into `on`.
    async fn read_events_switch(&self, on: &EventsOn) -> Result<()> {
        match self.events_on().await {
            Ok(read) => on.store(read),
            Err(err @ (Error::Unreachable(_) | Error::Timeout(_))) => return Err(err),
            Err(err) => {
                tracing::debug!(error = %err, "cannot read which queues have their events on");
                on.store(HashMap::new());
            }
        }
        Ok(())
    }

    /// Reads the switch into `on` in a task of its own, unless one is already reading it. A
    /// read that fails leaves `on` to go stale: the next call reads it, and meets the error.
    fn read_events_switch_behind(&self, on: Arc<EventsOn>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if on.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let queue = self.clone();
        runtime.spawn(async move {
            if let Err(err) = queue.read_events_switch(&on).await {
                tracing::debug!(error = %err, "cannot read which queues have their events on");
            }
            on.refreshing.store(false, Ordering::Release);
        });
    }

    /// Turns the events of `queue` on, its stream kept at about `maxlen` entries (see
    /// [`crate::status`]), or off with `None` (the stream stays until it is deleted). Every
    /// process that dispatches or runs its jobs notices within a second.
    pub async fn set_events(&self, queue: &str, maxlen: Option<u64>) -> Result<()> {
        let key = self.keys().events_on();
        let cmd = match maxlen {
            Some(maxlen) => redis::cmd("HSET")
                .arg(key)
                .arg(queue)
                .arg(maxlen.max(1))
                .clone(),
            None => redis::cmd("HDEL").arg(key).arg(queue).clone(),
        };
        self.query::<()>(&cmd).await?;
        // This handle reads the switch again before its next push.
        if let Some(on) = self.extensions().get::<EventsOn>() {
            *on.read.write().unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(())
    }

    /// The queues whose events are on, with their streams' lengths.
    pub async fn events_on(&self) -> Result<HashMap<String, u64>> {
        self.query(redis::cmd("HGETALL").arg(self.keys().events_on()))
            .await
    }
}

/// `XADD key MAXLEN ~ maxlen * fields...`: how this project appends to each of its streams,
/// kept at about `maxlen` entries.
pub(crate) fn xadd(key: &str, maxlen: u64, fields: &[(&str, &str)]) -> redis::Cmd {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(key).arg("MAXLEN").arg("~").arg(maxlen).arg("*");
    for (field, value) in fields {
        cmd.arg(*field).arg(*value);
    }
    cmd
}

/// The fields of one event of many jobs, as the calls that move jobs in numbers write it to a
/// queue's events stream: their uuids and attempts joined by spaces, their names by newlines,
/// each job given as (uuid, name, attempt). Readers give each job its own event.
pub(crate) struct JobsEntry {
    /// How many jobs.
    pub(crate) n: String,
    pub(crate) uuids: String,
    pub(crate) names: String,
    pub(crate) attempts: String,
}

impl JobsEntry {
    pub(crate) fn of(jobs: &[(&str, &str, u32)]) -> JobsEntry {
        JobsEntry {
            n: jobs.len().to_string(),
            uuids: join(jobs.iter().map(|job| job.0), " "),
            names: join(jobs.iter().map(|job| job.1), "\n"),
            attempts: join(jobs.iter().map(|job| job.2.to_string()), " "),
        }
    }

    /// The `XADD` of this entry as the event `event` to `stream`.
    pub(crate) fn xadd(&self, stream: &str, maxlen: u64, event: &str) -> redis::Cmd {
        xadd(
            stream,
            maxlen,
            &[
                ("event", event),
                ("n", &self.n),
                ("uuid", &self.uuids),
                ("job", &self.names),
                ("attempt", &self.attempts),
            ],
        )
    }
}

/// The texts of `items` joined by `separator`.
fn join<T: AsRef<str>>(items: impl Iterator<Item = T>, separator: &str) -> String {
    let mut joined = String::new();
    for (i, item) in items.enumerate() {
        if i > 0 {
            joined.push_str(separator);
        }
        joined.push_str(item.as_ref());
    }
    joined
}
