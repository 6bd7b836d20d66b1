//! Waiting for a job's outcome without polling: a process keeps one reader of the
//! `jobs:settled` stream while any of its tasks wait, and wakes each waiter when its job's
//! uuid goes by. A waiter reads the job's record when it starts and whenever it is woken, and
//! once a second besides, which covers entries the stream trimmed before they were read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::error::Error;
use crate::queue::RedisQueue;
use crate::status::record::{JobState, JobStatus};
use crate::status::signals::Signals;

/// How often a waiter reads its job's record when nothing wakes it.
const RECHECK: Duration = Duration::from_secs(1);

/// How long the reader's blocking read waits for an entry before it looks whether anyone
/// still waits.
const BLOCK: Duration = Duration::from_secs(1);

/// Why a wait ended without the job's result.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The job had not settled for good when the wait's time was up.
    #[error("the job had not finished after {0:?}")]
    Timeout(Duration),
    /// The job failed for good, for this reason.
    #[error("the job failed: {0}")]
    Failed(String),
    /// The job was cancelled.
    #[error("the job was cancelled")]
    Cancelled,
    /// The job's record went away while it was waited for (it expired, or was deleted).
    #[error("the job's status record expired while it was waited for")]
    Expired,
    /// The job is done, but its result is not the type asked for, or was not kept.
    #[error("the job is done, but its result cannot be read: {0}")]
    Result(String),
    /// Redis could not be asked.
    #[error(transparent)]
    Redis(#[from] Error),
}

/// The tasks of one handle (and its clones) that wait, by the uuid they wait for.
#[derive(Debug, Default)]
struct Waiters {
    state: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    by_uuid: HashMap<String, Vec<Arc<Notify>>>,
    /// The reader task runs.
    reading: bool,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a waiter; returns whether a reader must be started.
    fn register(&self, uuid: &str, notify: &Arc<Notify>) -> bool {
        let mut state = self.lock();
        state
            .by_uuid
            .entry(uuid.to_owned())
            .or_default()
            .push(notify.clone());
        !std::mem::replace(&mut state.reading, true)
    }

    fn deregister(&self, uuid: &str, notify: &Arc<Notify>) {
        let mut state = self.lock();
        if let Some(list) = state.by_uuid.get_mut(uuid) {
            list.retain(|n| !Arc::ptr_eq(n, notify));
            if list.is_empty() {
                state.by_uuid.remove(uuid);
            }
        }
    }

    fn wake(&self, uuid: &str) {
        if let Some(list) = self.lock().by_uuid.get(uuid) {
            list.iter().for_each(|n| n.notify_one());
        }
    }

    /// Whether the reader should stop: nobody waits. Decided under the lock a new waiter
    /// takes, so a waiter arriving now starts a new reader.
    fn stop_if_idle(&self) -> bool {
        let mut state = self.lock();
        if state.by_uuid.is_empty() {
            state.reading = false;
            return true;
        }
        false
    }

    fn stopped(&self) {
        self.lock().reading = false;
    }
}

/// A waiter's place among the [`Waiters`], given up when it is dropped.
struct Registration<'a> {
    waiters: &'a Waiters,
    uuid: &'a str,
    notify: Arc<Notify>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.waiters.deregister(self.uuid, &self.notify);
    }
}

impl RedisQueue {
    /// Waits up to `timeout` for the tracked job `uuid` to settle for good, and returns its
    /// final status: done, with its result ([`JobStatus::result_as`]). A failure or a cancel
    /// ends the wait with [`WaitError::Failed`] or [`WaitError::Cancelled`]. Woken by the
    /// settling call itself, it does not poll Redis in a loop. A job that is not tracked keeps
    /// no record to wait on: the wait then lasts until `timeout`.
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue, uuid: uuid::Uuid) -> Result<(), redjob::status::WaitError> {
    /// use std::time::Duration;
    /// let status = queue.wait(uuid, Duration::from_secs(30)).await?;
    /// println!("{uuid} is {} with {:?}", status.state, status.result);
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self, uuid: Uuid, timeout: Duration) -> Result<JobStatus, WaitError> {
        let deadline = Instant::now() + timeout;
        let waiters = self.extensions().get_or_insert_with(Waiters::default);
        let key = uuid.to_string();
        let notify = Arc::new(Notify::new());
        let _registration = Registration {
            waiters: &waiters,
            uuid: &key,
            notify: notify.clone(),
        };
        if waiters.register(&key, &notify) {
            let key = self.keys().settled_signals();
            match Signals::after_newest(self, key).await {
                Ok(signals) => {
                    tokio::spawn(read_settled(waiters.clone(), signals));
                }
                Err(err) => {
                    waiters.stopped();
                    return Err(err.into());
                }
            }
        }
        let mut seen = false;
        loop {
            let status = self.status(uuid).await?;
            match status.state {
                JobState::Done => return Ok(status),
                JobState::Failed => {
                    return Err(WaitError::Failed(status.error.unwrap_or_default()))
                }
                JobState::Cancelled => return Err(WaitError::Cancelled),
                JobState::Unknown if seen => return Err(WaitError::Expired),
                JobState::Unknown => {}
                _ => seen = true,
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(WaitError::Timeout(timeout));
            }
            let _ = tokio::time::timeout((deadline - now).min(RECHECK), notify.notified()).await;
        }
    }
}

/// Reads `jobs:settled` with `signals`, waking the waiters of each uuid that goes by, until
/// nobody waits.
async fn read_settled(waiters: Arc<Waiters>, mut signals: Signals) {
    while !waiters.stop_if_idle() {
        for entry in signals.next(BLOCK).await {
            if let Some(uuid) = entry.get("uuid") {
                waiters.wake(uuid);
            }
        }
    }
}
