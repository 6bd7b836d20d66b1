//! The worker's link with its operators: what it publishes (its heartbeat record and per-minute
//! job counters) and what it obeys (paused queues, restart requests).
//!
//! Nothing here costs a Redis call per job. The processor counts each attempt in memory
//! ([`Control::record`]); the fetcher reads the paused queues from memory
//! ([`Control::is_paused`]). Once a second, one task sends a single pipeline that adds the
//! counters to the minute hashes, adds the attempts to their queues' recent-jobs lists,
//! refreshes the heartbeat record, and reads back the paused queues and the restart key. The
//! Prometheus counters ([`crate::prometheus`]) are fed from the same [`Control::record`].

use chrono::{DateTime, Utc};
use redjob::__worker::telemetry;
use redjob::admin::{AttemptOutcome, Bucket, RecentJob, WorkerInfo, RECENT_LIMIT};
use redjob::RedisQueue;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::WorkerConfig;
use crate::runtime::lease::Running;
use crate::runtime::lifecycle::{Service, Stopping};
use crate::stats::Stats;

/// How often the worker publishes and reads its operators' requests.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// State shared between the worker loop, the processor and the publishing task.
pub(crate) struct Control {
    worker_name: String,
    paused: RwLock<HashSet<String>>,
    paused_changed: Notify,
    restart: CancellationToken,
    pending: Mutex<Pending>,
}

/// What was gathered since the last pipeline.
#[derive(Default)]
struct Pending {
    /// Counters by minute.
    counts: BTreeMap<i64, Bucket>,
    /// Finished attempts by queue, oldest first, at most [`RECENT_LIMIT`] each.
    recent: HashMap<String, VecDeque<RecentJob>>,
    /// The job types met and put back because this worker cannot run them, by name.
    unrunnable: HashMap<String, Unrunnable>,
}

/// A job type this worker met and could not run, since the last pipeline.
struct Unrunnable {
    queue: String,
    /// The earliest first meeting of its jobs met (Unix seconds).
    since: i64,
    /// The last time this worker met one (Unix seconds).
    at: i64,
    reason: String,
}

/// One settled attempt, as the processor reports it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt<'a> {
    /// The queue it was taken from.
    pub queue: &'a str,
    /// The payload's job name, or `?`.
    pub job: &'a str,
    /// The job's uuid.
    pub uuid: &'a str,
    /// The attempt's number (0 when unknown).
    pub attempt: u32,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// How long it took.
    pub runtime: Duration,
    /// Why it failed or was released.
    pub reason: Option<&'a str>,
    /// The job's tags.
    pub tags: &'a [String],
}

impl Control {
    /// The state of the worker called `worker_name` (its `--name`): nothing paused, no
    /// restart requested, nothing counted.
    pub(crate) fn new(worker_name: &str) -> Self {
        Control {
            worker_name: worker_name.to_owned(),
            paused: RwLock::new(HashSet::new()),
            paused_changed: Notify::new(),
            restart: CancellationToken::new(),
            pending: Mutex::new(Pending::default()),
        }
    }

    /// Whether workers must skip the queue `name`, as last read from Redis.
    pub(crate) fn is_paused(&self, name: &str) -> bool {
        self.paused
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// Completes when the set of paused queues changes.
    pub(crate) async fn paused_changed(&self) {
        self.paused_changed.notified().await
    }

    /// Whether a restart was requested since the worker started.
    pub(crate) fn restart_requested(&self) -> bool {
        self.restart.is_cancelled()
    }

    /// Completes when a restart is requested.
    pub(crate) async fn restarted(&self) {
        self.restart.cancelled().await
    }

    /// Counts one settled attempt in the current minute and in the Prometheus metrics, and
    /// keeps it for its queue's recent-jobs list.
    pub(crate) fn record(&self, attempt: &Attempt<'_>) {
        let now = Utc::now();
        // Outside the lock that every job task and the publisher share.
        crate::prometheus::record(attempt.queue, attempt.job, attempt.outcome, attempt.runtime);
        let mut pending = self.lock_pending();
        pending
            .counts
            .entry(telemetry::minute_of(now))
            .or_default()
            .record(attempt.queue, attempt.job, attempt.outcome, attempt.runtime);
        let list = match pending.recent.get_mut(attempt.queue) {
            Some(list) => list,
            None => pending.recent.entry(attempt.queue.to_owned()).or_default(),
        };
        // A busy queue fills its list within the second between two publishes, and then each
        // attempt takes the place of the oldest: it is written into that entry's buffers,
        // which saves every attempt its allocations.
        let mut recent = if list.len() == RECENT_LIMIT {
            list.pop_front()
        } else {
            None
        }
        .unwrap_or_else(|| RecentJob {
            uuid: String::new(),
            job: String::new(),
            queue: String::new(),
            attempt: 0,
            outcome: attempt.outcome,
            runtime_us: 0,
            finished_at: now,
            worker: String::new(),
            reason: None,
            tags: Vec::new(),
        });
        self.fill(&mut recent, attempt, now);
        list.push_back(recent);
    }

    /// Keeps, for the operators, that a job of type `job` taken from `queue`, which a worker
    /// first met at `since` (Unix seconds), could not run here, for `reason`.
    pub(crate) fn met_unrunnable(&self, job: &str, queue: &str, since: i64, reason: &str) {
        let met = Unrunnable {
            queue: queue.to_owned(),
            since,
            at: Utc::now().timestamp(),
            reason: reason.to_owned(),
        };
        merge_unrunnable(&mut self.lock_pending().unrunnable, job.to_owned(), met);
    }

    /// Writes `attempt`, which ended `now`, into `recent`, reusing its buffers.
    fn fill(&self, recent: &mut RecentJob, attempt: &Attempt<'_>, now: DateTime<Utc>) {
        fn set(buffer: &mut String, value: &str) {
            buffer.clear();
            buffer.push_str(value);
        }
        set(&mut recent.uuid, attempt.uuid);
        set(&mut recent.job, attempt.job);
        set(&mut recent.queue, attempt.queue);
        set(&mut recent.worker, &self.worker_name);
        recent.attempt = attempt.attempt;
        recent.outcome = attempt.outcome;
        recent.runtime_us = attempt.runtime.as_micros().min(u64::MAX as u128) as u64;
        recent.finished_at = now;
        recent.reason = attempt
            .reason
            .map(|reason| reason.chars().take(RecentJob::REASON_LIMIT).collect());
        recent.tags.clear();
        recent.tags.extend(attempt.tags.iter().cloned());
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_pending(&self) -> Pending {
        std::mem::take(&mut *self.lock_pending())
    }

    /// Puts back what could not be sent, to go with the next pipeline.
    fn restore_pending(&self, unsent: Pending) {
        let mut pending = self.lock_pending();
        for (minute, bucket) in unsent.counts {
            pending.counts.entry(minute).or_default().merge(&bucket);
        }
        for (queue, mut older) in unsent.recent {
            let newer = pending.recent.remove(&queue).unwrap_or_default();
            older.extend(newer);
            while older.len() > RECENT_LIMIT {
                older.pop_front();
            }
            pending.recent.insert(queue, older);
        }
        for (job, met) in unsent.unrunnable {
            merge_unrunnable(&mut pending.unrunnable, job, met);
        }
    }

    fn set_paused(&self, names: Vec<String>) {
        let names: HashSet<String> = names.into_iter().collect();
        let mut paused = self.paused.write().unwrap_or_else(|e| e.into_inner());
        if *paused != names {
            *paused = names;
            drop(paused);
            self.paused_changed.notify_waiters();
        }
    }
}

/// What the publishing task needs to describe the worker.
struct Publisher {
    queue: RedisQueue,
    control: Arc<Control>,
    running: Arc<Running>,
    stats: Arc<Stats>,
    config: Arc<WorkerConfig>,
    id: String,
    host: String,
    started_at: DateTime<Utc>,
    /// The names of the job types this process links, as its record lists them.
    job_types: Vec<String>,
    /// The restart key as first read: a later, different value is a restart request.
    restart_seen: Option<Option<String>>,
    failing: bool,
}

/// Handle to the publishing task.
pub(crate) struct Publishing {
    task: JoinHandle<Publisher>,
    stop: CancellationToken,
}

/// Reads the paused queues and the restart key once, then publishes every [`TICK`] until
/// [`Publishing::close`]. The first read is done before this returns, so the worker's first
/// fetch already skips paused queues.
pub(crate) async fn start(
    queue: RedisQueue,
    control: Arc<Control>,
    running: Arc<Running>,
    stats: Arc<Stats>,
    config: Arc<WorkerConfig>,
) -> Publishing {
    let mut publisher = Publisher {
        queue,
        control,
        running,
        stats,
        config,
        id: uuid::Uuid::new_v4().to_string(),
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        started_at: Utc::now(),
        job_types: redjob::job::registry::all()
            .iter()
            .map(|job| job.name().to_owned())
            .collect(),
        restart_seen: None,
        failing: false,
    };
    publisher.tick(false).await;
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => publisher.tick(false).await,
                    _ = stop.cancelled() => return publisher,
                }
            }
        }
    });
    Publishing { task, stop }
}

impl Publishing {
    /// Stops publishing: sends the last counts and removes the worker's heartbeat record.
    pub(crate) async fn close(self) {
        self.stop.cancel();
        match self.task.await {
            Ok(mut publisher) => publisher.tick(true).await,
            Err(err) => warn!(error = %err, "the publishing task ended abnormally"),
        }
    }
}

impl Service for Publishing {
    /// [`Publishing::close`]: last, after every other service, so that its last counts hold
    /// everything the worker did.
    fn stop(self: Box<Self>) -> Stopping {
        Box::pin(self.close())
    }
}

impl Publisher {
    /// One round trip: the counts so far, the heartbeat record (or its removal when
    /// `last`), and the paused queues and restart key read back.
    async fn tick(&mut self, last: bool) {
        let pending = self.control.take_pending();
        let keys = self.queue.keys();
        let record_key = keys.worker(&self.id);
        // Single-key commands only: on a cluster the keys are in many slots, and
        // `query_each` sends each to its node.
        let mut commands = vec![
            redis::cmd("SMEMBERS").arg(keys.paused()).clone(),
            redis::cmd("GET").arg(keys.restart()).clone(),
        ];
        if last {
            commands.extend(telemetry::removal_commands(
                &keys.workers(),
                &record_key,
                &self.id,
            ));
        } else {
            let now = Utc::now();
            let record = self.record(now);
            let record = serde_json::to_string(&record).expect("a worker record serializes");
            commands.extend(telemetry::record_commands(
                &keys.workers(),
                &record_key,
                &self.id,
                &record,
                telemetry::WORKER_TTL,
                now,
            ));
        }
        let keep = (self.config.metrics_retention + Duration::from_secs(60)).as_secs() as i64;
        for (minute, bucket) in &pending.counts {
            let key = keys.metrics_minute(*minute);
            for (field, by) in bucket.increments() {
                commands.push(redis::cmd("HINCRBY").arg(&key).arg(field).arg(by).clone());
            }
            commands.push(redis::cmd("EXPIRE").arg(&key).arg(keep).clone());
        }
        for (queue, jobs) in &pending.recent {
            let key = keys.recent(queue);
            let entries: Vec<String> = jobs
                .iter()
                .map(|job| serde_json::to_string(job).expect("a recent job serializes"))
                .collect();
            // LPUSH puts the last entry, the newest, at the head.
            commands.push(redis::cmd("LPUSH").arg(&key).arg(entries).clone());
            let last_kept = RECENT_LIMIT as isize - 1;
            commands.push(redis::cmd("LTRIM").arg(&key).arg(0).arg(last_kept).clone());
            commands.push(redis::cmd("EXPIRE").arg(&key).arg(keep).clone());
        }
        let met: Vec<telemetry::Met<'_>> = pending
            .unrunnable
            .iter()
            .map(|(job, met)| telemetry::Met {
                job,
                queue: &met.queue,
                since: met.since,
                at: met.at,
                reason: &met.reason,
            })
            .collect();
        commands.extend(telemetry::met_commands(keys, &met));
        drop(met);
        let reply: redjob::Result<Vec<redis::Value>> = self.queue.query_each(&commands).await;
        // Which queues have their events on, for the jobs this worker runs.
        if let Err(err) = self.queue.events_switch().await {
            tracing::debug!(error = %err, "cannot read which queues have their events on");
        }
        // The paused queues and the restart key are the first two replies; the writes' replies
        // say nothing worth reading.
        let reply = reply.and_then(|mut replies| {
            replies.truncate(2);
            let read: (Vec<String>, Option<String>) =
                redis::from_redis_value(redis::Value::Array(replies))
                    .map_err(|err| redjob::Error::from(redis::RedisError::from(err)))?;
            Ok(read)
        });
        match reply {
            Ok((paused, restart)) => {
                if self.failing {
                    info!("publishing worker state again");
                    self.failing = false;
                }
                self.control.set_paused(paused);
                self.check_restart(restart);
            }
            Err(err) => {
                if !self.failing {
                    warn!(error = %err, "cannot publish worker state; counts are kept for later");
                    self.failing = true;
                }
                self.control.restore_pending(pending);
            }
        }
    }

    fn check_restart(&mut self, value: Option<String>) {
        match &self.restart_seen {
            None => self.restart_seen = Some(value),
            Some(seen) if *seen != value && !self.control.restart.is_cancelled() => {
                info!("restart requested; stopping once the running jobs are done");
                self.control.restart.cancel();
            }
            Some(_) => {}
        }
    }

    fn record(&self, now: DateTime<Utc>) -> WorkerInfo {
        WorkerInfo {
            id: self.id.clone(),
            name: self.config.name.clone(),
            host: self.host.clone(),
            pid: std::process::id(),
            queues: self.config.queues.clone(),
            concurrency: self.config.concurrency,
            running: self.running.len(),
            processed: self.stats.processed(),
            failed: self.stats.failed(),
            started_at: self.started_at,
            last_heartbeat: now,
            jobs: self.running.listed(now, redjob::admin::RUNNING_LISTED),
            job_types: self.job_types.clone(),
        }
    }
}

/// Adds the meeting `met` of the job type `job` to `into`: the earliest first meeting kept,
/// the last meeting's queue, time and reason taken.
fn merge_unrunnable(into: &mut HashMap<String, Unrunnable>, job: String, met: Unrunnable) {
    match into.get_mut(&job) {
        Some(kept) => {
            let since = kept.since.min(met.since);
            if met.at >= kept.at {
                *kept = met;
            }
            kept.since = since;
        }
        None => {
            into.insert(job, met);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_jobs_keep_the_last_ones_of_each_queue_with_their_own_fields_in_reused_entries() {
        let control = Control::new("billing");
        let attempts = 2 * (RECENT_LIMIT + 25);
        for n in 0..attempts {
            let uuid = format!("u{n}");
            let failed = n % 3 == 0;
            let tags = vec![format!("t{n}"); n % 4];
            control.record(&Attempt {
                queue: if n % 2 == 0 { "even" } else { "odd" },
                job: if failed { "mail" } else { "invoice" },
                uuid: &uuid,
                attempt: n as u32,
                outcome: if failed {
                    AttemptOutcome::Failed
                } else {
                    AttemptOutcome::Done
                },
                runtime: Duration::from_micros(n as u64),
                reason: failed.then_some("boom"),
                tags: &tags,
            });
        }
        let pending = control.take_pending();
        let even = &pending.recent["even"];
        assert_eq!(even.len(), RECENT_LIMIT);
        let uuids: Vec<&str> = even.iter().map(|job| job.uuid.as_str()).collect();
        let expected: Vec<String> = (0..attempts)
            .filter(|n| n % 2 == 0)
            .skip(25)
            .map(|n| format!("u{n}"))
            .collect();
        assert_eq!(uuids, expected);
        assert_eq!(pending.recent["odd"].len(), RECENT_LIMIT);
        for job in even.iter().chain(&pending.recent["odd"]) {
            let n: usize = job.uuid[1..].parse().unwrap();
            let failed = n % 3 == 0;
            assert_eq!(job.queue, if n % 2 == 0 { "even" } else { "odd" });
            assert_eq!(job.job, if failed { "mail" } else { "invoice" });
            assert_eq!(job.attempt, n as u32);
            assert_eq!(job.runtime_us, n as u64);
            assert_eq!(job.reason.as_deref(), failed.then_some("boom"));
            assert_eq!(job.worker, "billing");
            assert_eq!(job.tags, vec![format!("t{n}"); n % 4]);
        }
    }
}
