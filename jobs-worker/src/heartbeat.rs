//! The heartbeat: keeps the reservations of running jobs alive.
//!
//! Every third of `--retry-after`, the worker pushes the expiry of each running job's
//! reservation to retry_after from now. While the worker lives, its jobs' reservations never
//! expire, however long the jobs run, so a job is never handed to a second worker; when the
//! worker dies, they expire after retry_after and the jobs come back.

use jobs_core::RedisQueue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::processor::Reserved;

/// The jobs this worker is running, by a private id.
#[derive(Default)]
pub struct Running {
    next_id: AtomicU64,
    jobs: Mutex<HashMap<u64, Reserved>>,
}

/// A running job's place in [`Running`]; dropping it takes the job out.
pub struct Held {
    running: Arc<Running>,
    id: u64,
}

impl Running {
    /// Records `job` as running until the returned guard is dropped.
    pub fn hold(self: &Arc<Self>, job: &Reserved) -> Held {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, job.clone());
        Held {
            running: self.clone(),
            id,
        }
    }

    /// How many jobs are running.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no job is running.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// How many of these reserved copies belong to jobs no longer running.
    fn finished_among(&self, members: &[&str]) -> usize {
        let jobs = self.lock();
        members
            .iter()
            .filter(|member| !jobs.values().any(|job| job.raw == **member))
            .count()
    }

    fn snapshot(&self) -> Vec<Reserved> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Reserved>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.running.lock().remove(&self.id);
    }
}

/// Starts extending the reservations of `running` jobs every third of `retry_after`.
pub fn start(queue: RedisQueue, running: Arc<Running>, retry_after: Duration) -> JoinHandle<()> {
    let every = (retry_after / 3).max(Duration::from_millis(50));
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let jobs = running.snapshot();
            for (keys, members) in Reserved::by_queue(&jobs) {
                match queue.extend(keys, retry_after, &members).await {
                    Ok(held) if (held as usize) < members.len() => {
                        // A job that finished since the snapshot may have been acknowledged
                        // before the extension ran; only the rest lost their reservations.
                        let finished = running.finished_among(&members);
                        let lost = (members.len() - held as usize).saturating_sub(finished);
                        if lost > 0 {
                            warn!(
                                queue = %keys.name,
                                lost,
                                "running jobs whose reservations were no longer held (expired while Redis was unreachable or stalled)"
                            );
                        }
                    }
                    Ok(_) => {}
                    Err(err) => {
                        warn!(error = %err, "cannot extend the reservations of running jobs")
                    }
                }
            }
        }
    })
}
