//! Which queues have their events on (`jobs:events`: queue name -> the length its stream is
//! kept at), as a handle knows it: kept in the handle's extensions, shared by its clones, and
//! never more than a second old when a push goes by it. A process notices an operator's switch
//! within a second; a queue with events off costs its jobs nothing but this read, which a
//! handle in use makes in the background, so that its pushes do not wait for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::queue::handle::RedisQueue;

/// How old a handle's knowledge of the switched-on queues may be.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// How often a handle in use reads the switch in the background: often enough that what it
/// knows stays under [`FRESH`] old, and its pushes need not read it first.
const READ_EVERY: Duration = Duration::from_millis(800);

/// How long after a handle's last push its background reads go on.
const READ_WHILE_USED: Duration = Duration::from_secs(30);

/// The queues with their events on, as last read.
#[derive(Debug, Default)]
pub(crate) struct EventsOn {
    read: RwLock<Option<(Instant, HashMap<String, u64>)>>,
    /// When a push last went by it.
    used: Mutex<Option<Instant>>,
    /// The task that reads it in the background while the handle is in use.
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl EventsOn {
    /// How long ago the switch was read; `None` when it never was.
    fn age(&self) -> Option<Duration> {
        let read = self.read.read().unwrap_or_else(|e| e.into_inner());
        read.as_ref().map(|(at, _)| at.elapsed())
    }

    fn note_use(&self) {
        *self.used.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Whether no push went by it for [`READ_WHILE_USED`].
    fn unused(&self) -> bool {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.is_none_or(|at| at.elapsed() >= READ_WHILE_USED)
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
    /// The first call also starts reading the switch in the background, every 0.8 s, until
    /// the handle's clones are all dropped or 30 s pass without a call: a handle in use never
    /// waits for the read again.
    pub async fn events_switch(&self) -> Result<()> {
        if self.is_offline() {
            return Ok(());
        }
        let on = self.extensions().get_or_insert_with(EventsOn::default);
        on.note_use();
        self.keep_reading_events_switch(&on);
        match on.age() {
            Some(age) if age < FRESH => Ok(()),
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

    /// Starts the task that reads the switch into `on` every [`READ_EVERY`], unless it runs
    /// (one whose runtime ended is started again). It ends once it holds the handle's last
    /// clone, or no push went by the switch for [`READ_WHILE_USED`]. A read that fails leaves
    /// `on` to go stale: the next push reads it, and meets the error.
    fn keep_reading_events_switch(&self, on: &Arc<EventsOn>) {
        let mut reader = on.reader.lock().unwrap_or_else(|e| e.into_inner());
        if reader.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (queue, on) = (self.clone(), on.clone());
        *reader = Some(runtime.spawn(async move {
            loop {
                tokio::time::sleep(READ_EVERY).await;
                if queue.extensions().is_only_clone() || on.unused() {
                    return;
                }
                if let Err(err) = queue.read_events_switch(&on).await {
                    tracing::debug!(error = %err, "cannot read which queues have their events on");
                }
            }
        }));
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
