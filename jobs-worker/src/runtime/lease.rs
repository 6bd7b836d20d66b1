//! The lease: keeps the reservations of the worker's jobs alive while it holds them, running
//! or waiting for a slot.
//!
//! Every third of `--retry-after`, the worker pushes the expiry of each reserved job's
//! reservation to retry_after from now. While the worker lives, its jobs' reservations never
//! expire, however long the jobs run, so a job is never handed to a second worker; when the
//! worker dies, they expire after retry_after and the jobs come back. A job the watchdog took
//! over is left to expire too. What running jobs hold through their middleware (funnel
//! slots, overlap locks) is renewed the same way.

use redjob::__worker::{AttemptSetup, ExtendArgs, RenewArgs, WorkerQueue};
use redjob::queue::hold::{Hold, Holds};
use redjob::RedisQueue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tracing::warn;
use uuid::Uuid;

use crate::runtime::deadline::Deadline;
use crate::runtime::reserved::Reserved;

/// The jobs this worker has reserved (running, or waiting for a slot), by a private id. The
/// lease extends their reservations; the watchdog watches the deadlines of their handlers.
#[derive(Default)]
pub(crate) struct Running {
    next_id: AtomicU64,
    jobs: Mutex<HashMap<u64, Entry>>,
}

struct Entry {
    job: Reserved,
    /// Set while the job's handler runs.
    deadline: Option<Deadline>,
    /// When the job was cancelled while its handler ran.
    cancelled_at: Option<Instant>,
    /// The watchdog took the job over: the lease lets its reservation expire, and the
    /// processor leaves it alone.
    taken_over: bool,
    /// What the job's middleware holds, renewed with the reservation.
    holds: Arc<Holds>,
    /// The job runs; until then (reserved ahead of a free slot, say) its reservation is
    /// extended all the same.
    started: bool,
}

/// A reserved job's place in [`Running`]; dropping it takes the job out.
pub(crate) struct Held {
    running: Arc<Running>,
    id: u64,
    /// What the job's middleware holds, shared with its entry, which the lease renews.
    holds: Arc<Holds>,
    // Learnt when the handler's deadline is taken away, under the lock that takes it, so that
    // asking costs the job path no second lock.
    taken_over: AtomicBool,
}

/// A handler's deadline as the watchdog sees it; dropping it takes the
/// deadline away.
pub(crate) struct Watched<'a> {
    held: &'a Held,
}

impl Running {
    /// Records `job`, reserved by this worker, until the returned guard is dropped: its
    /// reservation is extended from now on, and it counts as running when `started`, or
    /// once [started](Held::start) (a job reserved ahead of a free slot).
    pub(crate) fn hold(self: &Arc<Self>, job: &Reserved, started: bool) -> Held {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let holds = Arc::new(Holds::default());
        let entry = Entry {
            job: job.clone(),
            deadline: None,
            cancelled_at: None,
            taken_over: false,
            holds: holds.clone(),
            started,
        };
        self.lock().insert(id, entry);
        Held {
            running: self.clone(),
            id,
            holds,
            taken_over: AtomicBool::new(false),
        }
    }

    /// How many jobs are running (not those waiting for a slot).
    pub(crate) fn len(&self) -> usize {
        self.lock().values().filter(|entry| entry.started).count()
    }

    /// Whether no job is held, running or waiting.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Takes over every job whose handler is still running `margin` after its deadline, or
    /// `grace` and `margin` after it was cancelled: the lease stops extending its reservation,
    /// and its processor will not settle it.
    pub(crate) fn take_over_overdue(
        &self,
        now: Instant,
        margin: Duration,
        grace: Duration,
    ) -> Vec<(Reserved, Deadline)> {
        let mut jobs = self.lock();
        let mut overdue = Vec::new();
        for entry in jobs.values_mut() {
            let Some(deadline) = &entry.deadline else {
                continue;
            };
            let timed_out = deadline.at().is_some_and(|at| now >= at + margin);
            let stopped = entry
                .cancelled_at
                .is_some_and(|at| now >= at + grace + margin);
            if timed_out || stopped {
                entry.taken_over = true;
                if let Some(deadline) = entry.deadline.take() {
                    overdue.push((entry.job.clone(), deadline));
                }
            }
        }
        overdue
    }

    /// Fires the cancellation of the jobs running here whose uuids `requested` holds (as text,
    /// as cancel requests name them) and that were not cancelled already, in one pass; returns
    /// their uuids.
    pub(crate) fn cancel_requested(&self, requested: impl Fn(&str) -> bool) -> Vec<Uuid> {
        let mut jobs = self.lock();
        let mut fired = Vec::new();
        for entry in jobs.values_mut() {
            let Some(deadline) = &entry.deadline else {
                continue;
            };
            let uuid = deadline.attempt.context().uuid();
            let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
            if entry.cancelled_at.is_none() && requested(uuid.hyphenated().encode_lower(&mut text))
            {
                deadline.attempt.context().cancellation().cancel();
                entry.cancelled_at = Some(Instant::now());
                fired.push(uuid);
            }
        }
        fired
    }

    /// The jobs whose handlers run here, at most `limit`, oldest first, as a worker's record
    /// lists them; `now` is the time of the record.
    pub(crate) fn listed(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> Vec<redjob::admin::RunningJob> {
        let mut jobs: Vec<(Instant, redjob::admin::RunningJob)> = self
            .lock()
            .values()
            .filter_map(|entry| entry.deadline.as_ref())
            .map(|deadline| {
                let ctx = deadline.attempt.context();
                let ran =
                    chrono::Duration::from_std(deadline.started.elapsed()).unwrap_or_default();
                let job = redjob::admin::RunningJob {
                    uuid: ctx.uuid().to_string(),
                    job: ctx.job_name().to_owned(),
                    queue: ctx.queue().to_owned(),
                    attempt: ctx.attempt(),
                    started_at: now - ran,
                    checkpointed: ctx.has_checkpoint(),
                };
                (deadline.started, job)
            })
            .collect();
        jobs.sort_by_key(|(started, _)| *started);
        jobs.into_iter().take(limit).map(|(_, job)| job).collect()
    }

    /// How many of these reserved copies belong to jobs no longer running.
    fn finished_among(&self, members: &[&str]) -> usize {
        let jobs = self.lock();
        members
            .iter()
            .filter(|member| !jobs.values().any(|entry| entry.job.raw == **member))
            .count()
    }

    /// Whether every job still here was taken over by the watchdog.
    pub(crate) fn only_taken_over_left(&self) -> bool {
        self.lock().values().all(|entry| entry.taken_over)
    }

    fn snapshot(&self) -> Vec<Reserved> {
        self.lock()
            .values()
            .filter(|entry| !entry.taken_over)
            .map(|entry| entry.job.clone())
            .collect()
    }

    /// The leases every running job not taken over holds.
    fn leases(&self) -> Vec<Hold> {
        self.lock()
            .values()
            .filter(|entry| !entry.taken_over)
            .flat_map(|entry| entry.holds.leases())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Held {
    /// Marks a job reserved ahead running, once it has a slot.
    pub(crate) fn start(&self) {
        if let Some(entry) = self.running.lock().get_mut(&self.id) {
            entry.started = true;
        }
    }

    /// Where the job's middleware records what it holds, renewed with its reservation.
    pub(crate) fn holds(&self) -> &Arc<Holds> {
        &self.holds
    }

    /// Whether the watchdog took the job over (its handler blocked its thread past its
    /// timeout): the watchdog settles it, and nothing else may. Known once the handler's
    /// deadline is taken away ([`Watched`] dropped); only a watched job can be taken over.
    pub(crate) fn taken_over(&self) -> bool {
        self.taken_over.load(Ordering::Acquire)
    }

    /// Shows the job's handler to the watchdog until the returned guard ends.
    pub(crate) fn watch(&self, deadline: Deadline) -> Watched<'_> {
        if let Some(entry) = self.running.lock().get_mut(&self.id) {
            entry.deadline = Some(deadline);
        }
        Watched { held: self }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.running.lock().remove(&self.id);
    }
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.held.running.lock().get_mut(&self.held.id) {
            entry.deadline = None;
            if entry.taken_over {
                self.held.taken_over.store(true, Ordering::Release);
            }
        }
    }
}

/// Starts extending the reservations of `running` jobs every third of `retry_after`.
pub(crate) fn start(
    queue: RedisQueue,
    running: Arc<Running>,
    retry_after: Duration,
) -> JoinHandle<()> {
    let every = (retry_after / 3).max(Duration::from_millis(50));
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let jobs = running.snapshot();
            for (keys, members) in Reserved::by_queue(&jobs) {
                match WorkerQueue::of(&queue)
                    .extend(ExtendArgs {
                        queue: keys,
                        retry_after,
                        reserved: &members,
                    })
                    .await
                {
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
            let leases = running.leases();
            if let Err(err) = WorkerQueue::of(&queue)
                .renew_holds(RenewArgs {
                    holds: &leases,
                    lease: retry_after,
                })
                .await
            {
                warn!(error = %err, "cannot renew what running jobs hold");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::rules::Limits;
    use redjob::__worker::AttemptHooks;
    use redjob::queue::keys::QueueKeys;
    use redjob::{Backoff, JobContext};

    fn job(raw: &str) -> Reserved {
        Reserved {
            queue: Arc::new(QueueKeys::new("q")),
            raw: raw.to_owned(),
            unreadable: None,
        }
    }

    fn deadline(timeout: Duration) -> Deadline {
        let uuid = uuid::Uuid::new_v4();
        let payload = redjob::payload::Payload::from_json(&format!(
            r#"{{"uuid":"{uuid}","displayName":"J","job":"j","data":{{}},"id":"{uuid}","attempts":1}}"#
        ))
        .unwrap();
        let ctx = Arc::new(JobContext::new(uuid, "j", "q", 1));
        let attempt = AttemptHooks::start(&payload, ctx);
        let limits = Limits {
            max_tries: 1,
            backoff: Backoff::default(),
            timeout: Some(timeout),
            fail_on_timeout: false,
            may_requeue: true,
            retry_until: None,
            max_exceptions: None,
            exceptions: 0,
            interruptions: (0, 10),
        };
        Deadline::new(Some(timeout), attempt, limits, "J")
    }

    #[test]
    fn an_overdue_job_is_taken_over_once_and_left_out_of_the_heartbeat() {
        let running = Arc::new(Running::default());
        let (late, on_time) = (
            running.hold(&job("late"), true),
            running.hold(&job("on time"), true),
        );
        let late_watch = late.watch(deadline(Duration::ZERO));
        let on_time_watch = on_time.watch(deadline(Duration::from_secs(3600)));
        let margin = Duration::from_millis(1);
        assert!(running
            .take_over_overdue(Instant::now(), margin, margin)
            .is_empty());

        let later = Instant::now() + Duration::from_secs(1);
        let taken = running.take_over_overdue(later, margin, margin);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0.raw, "late");
        assert!(running.take_over_overdue(later, margin, margin).is_empty());
        let extended: Vec<_> = running.snapshot().into_iter().map(|j| j.raw).collect();
        assert_eq!(extended, ["on time"]);
        assert!(!running.only_taken_over_left());

        drop((late_watch, on_time_watch));
        assert!(late.taken_over(), "the processor learns it was taken over");
        assert!(!on_time.taken_over());
        drop(on_time);
        assert!(running.only_taken_over_left());
        drop(late);
        assert!(running.is_empty());
    }

    #[test]
    fn a_handler_that_ended_in_time_is_not_taken_over() {
        let running = Arc::new(Running::default());
        let held = running.hold(&job("quick"), true);
        drop(held.watch(deadline(Duration::ZERO)));
        assert!(!held.taken_over());
        let later = Instant::now() + Duration::from_secs(10);
        assert!(running
            .take_over_overdue(later, Duration::ZERO, Duration::ZERO)
            .is_empty());
    }
}
