//! The job loop: keeps the concurrency slots busy with reserved jobs, waits while the queues
//! are idle, and says when the worker must stop.

use futures_util::stream::{FuturesOrdered, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::config::WorkerConfig;
use crate::exit::Exit;
use crate::runtime::ahead::Ahead;
use crate::runtime::fetcher::{Fetched, Fetcher};
use crate::runtime::outage::{Pause, TAKING_PAUSE_MAX};
use crate::runtime::reserved::Reserved;
use crate::runtime::services::Services;
use crate::runtime::slot::{self, Unstarted};
use crate::runtime::time::sleep_until;
use crate::stats::Stats;

/// Most pops one worker keeps in flight at once while the queues hold a backlog.
const MAX_FETCHES_IN_FLIGHT: usize = 6;

/// Most rounds of the slots' jobs that may wait reserved ahead of them.
const AHEAD_ROUNDS: usize = 3;

/// A due time this close sends no pop behind the idle wait: the timer would end the wait
/// before the pop reached Redis (`JobLoop::arm_waker`).
const SOON: Duration = Duration::from_millis(1);

/// How often the worker compares its memory with its limit.
const MEMORY_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// What a pop was made for.
enum Grant {
    /// Free slots, one per job: the jobs start at once.
    Slots(Vec<OwnedSemaphorePermit>),
    /// This many places ahead of the slots: each job starts in the next free slot.
    Ahead(usize),
    /// The free slots an idle worker held for the pop it sent behind its wait for a push
    /// (`waker.rs`), one per job: each job starts at once, or goes back to its queue unstarted
    /// if its queue was paused meanwhile.
    Idle(Vec<OwnedSemaphorePermit>),
}

impl Grant {
    /// How many jobs the pop may reserve.
    fn len(&self) -> usize {
        match self {
            Grant::Slots(permits) | Grant::Idle(permits) => permits.len(),
            Grant::Ahead(places) => *places,
        }
    }
}

/// A finished pop: what it was made for, and what it reserved.
type FetchDone = (Grant, redjob::Result<Fetched>);

/// A pop in flight.
type Fetch<'a> = Pin<Box<dyn Future<Output = FetchDone> + Send + 'a>>;

/// The state of one worker's job loop.
pub(crate) struct JobLoop<'a> {
    config: &'a WorkerConfig,
    services: &'a Services,
    stats: &'a Arc<Stats>,
    stop: &'a CancellationToken,
    slots: Arc<Semaphore>,
    /// Jobs reserved ahead of a free slot, in the order they were reserved: each starts in the
    /// next free slot, taken by the task of a slot whose job ended or by this loop. While a
    /// backlog drains, pops go out for them when every slot is busy (at most [`ahead_limit`]
    /// with those in flight), so that Redis reserves the next jobs while these run instead of
    /// after they end.
    waiting: Ahead<Unstarted>,
    running: JoinSet<()>,
    /// Pops in flight, each holding the slots or places its jobs will take. While the queues
    /// hold a backlog, more pops go out before the first returns, so Redis reserves the next
    /// batches while this process starts the last one. Taken in the order they were sent,
    /// which is the order Redis reserved their jobs in: two replies read at once would
    /// otherwise put later jobs ahead of earlier ones in the slots' queue.
    fetches: FuturesOrdered<Fetch<'a>>,
    /// Jobs the pops in flight may reserve, for free slots and ahead of them.
    asked: u64,
    /// Jobs the pops in flight may reserve ahead of the slots.
    ahead_asked: u64,
    /// Whether the last pop filled every slot or place it asked for.
    backlog: bool,
    /// The slots held for the pop sent behind the waker's wait, while it is out.
    behind: Option<Grant>,
    /// Set by the pop behind the idle wait when it reserved jobs but came back short: the
    /// queues had no more to give, so the next turn waits idle without asking them again.
    found_empty: Option<EmptyQueues>,
    /// Jobs taken so far, against `--once` and `--max-jobs`.
    taken: u64,
    /// How many jobs had been taken when a pop last found the queues empty with nothing
    /// running or waiting (`--stop-when-empty`).
    taken_when_empty: u64,
    job_limit: u64,
    started: Instant,
    fetch_pause: Pause,
    last_memory_check: Option<Instant>,
}

impl<'a> JobLoop<'a> {
    /// A loop over `services` that has taken no job yet.
    pub(crate) fn new(
        config: &'a WorkerConfig,
        services: &'a Services,
        stats: &'a Arc<Stats>,
        stop: &'a CancellationToken,
    ) -> Self {
        JobLoop {
            config,
            services,
            stats,
            stop,
            slots: Arc::new(Semaphore::new(config.concurrency)),
            waiting: Ahead::default(),
            running: JoinSet::new(),
            fetches: FuturesOrdered::new(),
            asked: 0,
            ahead_asked: 0,
            backlog: false,
            behind: None,
            found_empty: None,
            taken: 0,
            taken_when_empty: 0,
            job_limit: config.job_limit(),
            started: Instant::now(),
            fetch_pause: Pause::new(Duration::from_millis(100), TAKING_PAUSE_MAX),
            last_memory_check: None,
        }
    }

    /// Takes and runs jobs until a stop condition, then lets the running ones finish (or puts
    /// them back after the grace period). Returns why it stopped.
    pub(crate) async fn run(mut self) -> Exit {
        let exit = loop {
            while let Some(joined) = self.running.try_join_next() {
                reap(joined);
            }
            if let Some(exit) = self.stop_condition() {
                break exit;
            }
            let listeners = &self.services.processor.listeners;
            if !listeners.is_empty() {
                listeners.emit("looping", |l| l.looping()).await;
            }
            if let Some(exit) = self.turn().await {
                break exit;
            }
        };
        self.finish().await;
        exit
    }

    /// The stop conditions, in order: stop requested, restart requested, memory, time, job
    /// count.
    fn stop_condition(&mut self) -> Option<Exit> {
        if self.stop.is_cancelled() {
            return Some(Exit::Stopped);
        }
        if self.services.control.restart_requested() {
            return Some(Exit::Restart);
        }
        // Reading the process's memory costs tens of µs: once per 100 ms is enough, and not
        // between an idle wait and the start of the jobs its pop reserved.
        if self.behind.is_none()
            && self
                .last_memory_check
                .is_none_or(|at| at.elapsed() >= MEMORY_CHECK_INTERVAL)
        {
            self.last_memory_check = Some(Instant::now());
            if memory_mb() > self.config.memory_mb {
                warn!(limit_mb = self.config.memory_mb, "memory limit exceeded");
                return Some(Exit::MemoryExceeded);
            }
        }
        if self
            .config
            .max_time
            .is_some_and(|max| self.started.elapsed() >= max)
        {
            return Some(Exit::MaxTime);
        }
        (self.taken >= self.job_limit).then_some(Exit::MaxJobs)
    }

    /// One turn: a pop returns, or a free slot goes to the first job reserved ahead, or free
    /// slots (or, while a backlog drains, places ahead of them) are taken for the next pop, or
    /// a stop or restart is requested.
    async fn turn(&mut self) -> Option<Exit> {
        if let Some(empty) = self.found_empty.take() {
            self.wait_idle(empty.next_due).await;
            return None;
        }
        let room = self.job_limit - self.taken - self.asked;
        let may_fetch = room > 0
            && (self.fetches.is_empty()
                || (self.backlog && self.fetches.len() < MAX_FETCHES_IN_FLIGHT));
        // A pop beside one in flight waits for a worthwhile batch of free slots.
        let batch = if self.fetches.is_empty() {
            1
        } else {
            (self.config.concurrency as u64 / 4).max(1)
        };
        let (ahead_room, wake_len) = if may_fetch && self.backlog {
            let (ahead_room, wake_len) = self.ahead_room(batch);
            (ahead_room.min(room), wake_len)
        } else {
            (0, None)
        };
        // The slots' tasks take the jobs reserved ahead without the loop: it has them wake it
        // when so few are left that the next pop ahead is due.
        self.waiting.wake_at(wake_len);
        let services = self.services;
        let grant = tokio::select! {
            biased;
            Some(done) = self.fetches.next() => return self.fetched(done).await,
            popped = services.waker.popped(), if self.behind.is_some() => {
                return self.popped_behind_wait(popped).await;
            }
            slot = free_slot(&self.slots), if !self.waiting.is_empty() => {
                self.start_waiting(slot);
                return None;
            }
            _ = self.waiting.running_low(), if wake_len.is_some() => return None,
            // While jobs are being reserved ahead, free slots wait for them: a pop for the
            // slots would start jobs Redis reserved after them.
            permits = free_slots(&self.slots, batch.min(room), room), if may_fetch && self.ahead_asked == 0 => {
                Grant::Slots(permits)
            }
            places = std::future::ready(ahead_room as usize), if ahead_room > 0 => {
                Grant::Ahead(places)
            }
            _ = self.stop.cancelled() => return None,
            _ = services.control.restarted() => return None,
        };
        self.asked += grant.len() as u64;
        if let Grant::Ahead(places) = grant {
            self.ahead_asked += places as u64;
        }
        self.fetches
            .push_back(Box::pin(fetch_into(&services.fetcher, grant)));
        None
    }

    /// How many more jobs a pop may reserve ahead of the slots now and, while that is none,
    /// how few jobs waiting ahead would make room (`None`: no number would). The room is
    /// [`ahead_limit`] at the recent attempts' mean run time (none before the first attempt
    /// ends), less the jobs waiting or asked for ahead; none until it makes a `batch`, as for
    /// free slots.
    fn ahead_room(&self, batch: u64) -> (u64, Option<usize>) {
        let Some(runtime) = self.stats.recent_runtime() else {
            return (0, None);
        };
        let limit = ahead_limit(self.config.concurrency, runtime, self.config.reserve_ahead) as u64;
        let Some(most_waiting) = limit.checked_sub(self.ahead_asked + batch.min(limit)) else {
            return (0, None);
        };
        let waiting = self.waiting.len() as u64;
        if waiting <= most_waiting {
            (limit - waiting - self.ahead_asked, None)
        } else {
            (0, Some(most_waiting as usize))
        }
    }

    /// Starts the jobs a pop reserved; when it found none and no other pop is in flight,
    /// stops (`--once`, `--stop-when-empty`) or waits while idle.
    async fn fetched(&mut self, (grant, result): FetchDone) -> Option<Exit> {
        self.asked -= grant.len() as u64;
        if let Grant::Ahead(places) = grant {
            self.ahead_asked -= places as u64;
        }
        let fetched = match result {
            Ok(fetched) => {
                self.fetch_pause.reset();
                fetched
            }
            Err(err) => {
                self.backlog = false;
                let pause = self.fetch_pause.take();
                warn!(error = %err, "cannot fetch jobs; retrying in {pause:?}");
                drop(grant);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = self.stop.cancelled() => {}
                    _ = self.services.control.restarted() => {}
                }
                return None;
            }
        };
        self.backlog = fetched.jobs.len() == grant.len();
        let next_due = fetched.next_due.map(|due| Instant::now() + due);
        // A short pop behind the wait, with no other pop out, says the queues had no more to
        // give: the next turn waits again without a pop that would find them empty. The slots
        // it did not fill are free for the next pop behind the wait. The empty pop still
        // decides `--stop-when-empty`. A pop its timer made asks again at once, which finds a
        // job of a dense schedule due meanwhile sooner than the next timer, whose tick is a
        // millisecond.
        let short_behind_wait = matches!(grant, Grant::Idle(_))
            && !self.backlog
            && self.fetches.is_empty()
            && !self.config.stop_when_empty;
        if !fetched.jobs.is_empty() {
            self.taken += fetched.jobs.len() as u64;
            self.start_jobs(fetched.jobs, grant);
            if short_behind_wait {
                self.found_empty = Some(EmptyQueues { next_due });
            }
            return None;
        }
        drop(grant);
        if !self.fetches.is_empty() {
            return None;
        }
        if self.config.once {
            return Some(Exit::Empty);
        }
        if self.config.stop_when_empty && self.running.is_empty() && self.waiting.is_empty() {
            return self.empty_once_acknowledged().await;
        }
        self.wait_idle(next_due).await;
        None
    }

    /// Takes what the pop sent behind the waker's wait reserved, as a pop's result, or (when
    /// it did not run) gives back what it asked for, for a pop of the usual kind.
    async fn popped_behind_wait(&mut self, popped: Option<Fetched>) -> Option<Exit> {
        let grant = self.behind.take()?;
        match popped {
            Some(fetched) => {
                let starts = !fetched.jobs.is_empty();
                let exit = self.fetched((grant, Ok(fetched))).await;
                if starts {
                    // The jobs pushed to an idle worker start before its own next steps (the
                    // memory check, the next wait).
                    tokio::task::yield_now().await;
                }
                exit
            }
            None => {
                self.asked -= grant.len() as u64;
                None
            }
        }
    }

    /// With `--stop-when-empty`, once nothing runs or waits: stops if no job was taken since
    /// the queues were last found empty this way. Otherwise it waits for the acker and has
    /// the queues popped again, since a job that ended after the pop that found them empty was
    /// sent may have put work back in them: released for another attempt, or pushed by its
    /// acknowledgement (that of a batch's last job pushes the batch's callbacks). The second
    /// pop is sent once every taken job has ended and been acknowledged, so it sees it all.
    async fn empty_once_acknowledged(&mut self) -> Option<Exit> {
        let acks = &self.services.processor.settler.acks;
        if self.taken == self.taken_when_empty && acks.unacknowledged() == 0 {
            return Some(Exit::Empty);
        }
        tokio::select! {
            _ = acks.all_acknowledged() => {}
            _ = self.stop.cancelled() => {}
            _ = self.services.control.restarted() => {}
        }
        self.taken_when_empty = self.taken;
        None
    }

    /// Waits while the queues are empty, with a pop of the free slots sent behind the wait for a
    /// push where it can be (`waker.rs`): for a push, the next due job, `--sleep`, the end of
    /// `--max-time`, a stop, a restart, a pause or resume, or (with `--stop-when-empty`) the
    /// end of a running job. A job reserved ahead still takes the next free slot.
    async fn wait_idle(&mut self, next_due: Option<Instant>) {
        let out_of_time = self.config.max_time.map(|max| self.started + max);
        let services = self.services;
        self.arm_waker(next_due);
        tokio::select! {
            _ = services.waker.wait() => {}
            _ = sleep_until(next_due) => {}
            _ = tokio::time::sleep(self.config.sleep) => {}
            _ = sleep_until(out_of_time) => {}
            _ = self.stop.cancelled() => {}
            _ = services.control.restarted() => {}
            _ = services.control.paused_changed() => {}
            Some(joined) = self.running.join_next(), if self.config.stop_when_empty => reap(joined),
            slot = free_slot(&self.slots), if !self.waiting.is_empty() => self.start_waiting(slot),
        }
        if self.behind.is_some() {
            // The pop behind the wait is the next pop (`turn` takes it first): one that has not
            // come back (the worker leaves the wait for another reason, or a wake-up was owed
            // by an earlier wait) runs now, rather than later for a worker busy with other jobs.
            services.waker.hurry_pop().await;
        }
    }

    /// Arms the waker for an idle wait whose timer ends at `next_due`, with a pop sent behind
    /// it when the worker takes one queue and may reserve: the pop holds the free slots,
    /// leaving one job of a limit (`--max-jobs`) to the pops made when the worker leaves the
    /// wait. None while jobs reserved ahead wait for a slot (the next free slot is theirs),
    /// nor when the timer ends the wait at once (the pop would only be hurried).
    fn arm_waker(&mut self, next_due: Option<Instant>) {
        let services = self.services;
        let pop_behind = self.behind.is_none()
            && self.waiting.is_empty()
            && next_due.is_none_or(|due| due.saturating_duration_since(Instant::now()) >= SOON);
        let mut slots = Vec::new();
        if pop_behind {
            let room = self.job_limit - self.taken - self.asked;
            take_free_slots(&self.slots, &mut slots, room.saturating_sub(1));
        }
        let count = slots.len();
        let fetcher = &services.fetcher;
        let sent = services
            .waker
            .arm(|| (count > 0).then(|| fetcher.pop_behind(count)).flatten());
        if sent > 0 {
            self.asked += sent as u64;
            self.behind = Some(Grant::Idle(slots));
        }
    }

    /// Starts each reserved job in its own task in the slot it was reserved for; jobs reserved
    /// ahead wait for the next free slots instead, their reservations extended by the lease.
    fn start_jobs(&mut self, jobs: Vec<Reserved>, grant: Grant) {
        let running = &self.services.processor.running;
        match grant {
            Grant::Slots(slots) => {
                for (job, slot) in jobs.into_iter().zip(slots) {
                    let held = running.hold(&job, true);
                    self.start(Unstarted { job, held }, slot);
                }
            }
            Grant::Ahead(_) => {
                let unstarted = jobs.into_iter().map(|job| {
                    let held = running.hold(&job, false);
                    Unstarted { job, held }
                });
                self.waiting.extend(unstarted);
            }
            Grant::Idle(slots) => {
                let control = &self.services.control;
                let mut paused = Vec::new();
                for (job, slot) in jobs.into_iter().zip(slots) {
                    let paused_now = control.is_paused(&job.queue.name);
                    let held = running.hold(&job, !paused_now);
                    let unstarted = Unstarted { job, held };
                    if paused_now {
                        paused.push(unstarted);
                    } else {
                        self.start(unstarted, slot);
                    }
                }
                if !paused.is_empty() {
                    // Not taken after all: they count against no limit.
                    self.taken -= paused.len() as u64;
                    debug!(
                        jobs = paused.len(),
                        "putting back the jobs reserved behind the wait: their queue was paused"
                    );
                    self.give_back(paused);
                }
            }
        }
    }

    /// Starts the first job reserved ahead in `slot`.
    fn start_waiting(&mut self, slot: OwnedSemaphorePermit) {
        if let Some(waiting) = self.waiting.take().map(Unstarted::marked_started) {
            self.start(waiting, slot);
        }
    }

    /// Runs a reserved job in a task of its own holding `slot`, which goes on with the jobs
    /// reserved ahead ([`slot::run`]).
    fn start(&mut self, reserved: Unstarted, slot: OwnedSemaphorePermit) {
        let run = slot::run(
            self.services.processor.clone(),
            self.stats.clone(),
            self.config.rest,
            reserved,
            slot,
            self.services.interrupt.clone(),
            self.waiting.clone(),
        );
        // What the job dispatches goes to the worker's Redis, not to a process-wide default.
        self.running.spawn(self.services.processor.redis.scope(run));
    }

    /// Runs the jobs that pops still in flight reserved (nothing popped is dropped), then lets
    /// every running and waiting job finish. Once a stop is requested (before or during this
    /// wait), they get the grace period; those still running then are interrupted, which puts
    /// them back on their queues, and those still waiting ahead go back unstarted, their
    /// attempts not counted.
    async fn finish(mut self) {
        if let Some(grant) = self.behind.take() {
            if let Some(fetched) = self.services.waker.cancel_pop().await {
                self.start_jobs(fetched.jobs, grant);
            }
        }
        while let Some((grant, result)) = self.fetches.next().await {
            if let Ok(fetched) = result {
                self.start_jobs(fetched.jobs, grant);
            }
        }
        if self.running.is_empty() && self.waiting.is_empty() {
            return;
        }
        info!(
            running = self.running.len(),
            waiting = self.waiting.len(),
            "waiting for running jobs"
        );
        let interrupt = self.services.interrupt.clone();
        let mut deadline = None;
        let mut stop_seen = false;
        loop {
            if !stop_seen && self.stop.is_cancelled() {
                stop_seen = true;
                deadline = self.config.grace.map(|grace| Instant::now() + grace);
            }
            if interrupt.is_cancelled() {
                self.give_back_waiting();
            }
            if self.running.is_empty() && self.waiting.is_empty() {
                return;
            }
            tokio::select! {
                // An interrupted job frees its slot: no waiting job may start in it.
                biased;
                _ = interrupt.cancelled(), if !self.waiting.is_empty() => {}
                Some(joined) = self.running.join_next() => reap(joined),
                slot = free_slot(&self.slots), if !self.waiting.is_empty() => self.start_waiting(slot),
                _ = self.stop.cancelled(), if !stop_seen => {}
                _ = sleep_until(deadline), if !interrupt.is_cancelled() => {
                    warn!(running = self.running.len(), "grace period over; putting running jobs back");
                    interrupt.cancel();
                }
            }
        }
    }

    /// Puts every job still waiting ahead back on its queue unstarted, each in a task of its
    /// own.
    fn give_back_waiting(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        info!(
            jobs = self.waiting.len(),
            "putting the jobs reserved ahead back unstarted: the worker was interrupted"
        );
        let waiting = self.waiting.drain();
        self.give_back(waiting);
    }

    /// Puts `jobs` back on their queues unstarted, each in a task of its own.
    fn give_back(&mut self, jobs: Vec<Unstarted>) {
        for waiting in jobs {
            let processor = self.services.processor.clone();
            self.running.spawn(async move {
                // Held until given back: its reservation is extended meanwhile.
                let Unstarted { job, held: _held } = waiting;
                processor.settler.give_back(job).await;
            });
        }
    }
}

/// How many jobs may wait reserved ahead of `concurrency` slots whose jobs take `runtime` each:
/// as many as the slots start within `window` (`--reserve-ahead-ms`), up to [`AHEAD_ROUNDS`]
/// rounds of them.
fn ahead_limit(concurrency: usize, runtime: Duration, window: Duration) -> usize {
    let rounds = window.as_secs_f64() / runtime.as_secs_f64().max(1e-6);
    let places = AHEAD_ROUNDS * concurrency;
    (concurrency as f64 * rounds).min(places as f64) as usize
}

/// What a short pop said of the queues it found with no more jobs to give.
struct EmptyQueues {
    /// When the earliest delayed job or reservation of any of them falls due.
    next_due: Option<Instant>,
}

/// Reserves jobs for `grant`, handing it back with the result.
async fn fetch_into(fetcher: &Fetcher, grant: Grant) -> FetchDone {
    let fetched = fetcher.fetch(grant.len()).await;
    (grant, fetched)
}

/// Waits for one free slot.
async fn free_slot(slots: &Arc<Semaphore>) -> OwnedSemaphorePermit {
    slots
        .clone()
        .acquire_owned()
        .await
        .expect("the slot semaphore is never closed")
}

/// Waits for `min` free slots, then takes as many more as are free, up to `max`.
async fn free_slots(slots: &Arc<Semaphore>, min: u64, max: u64) -> Vec<OwnedSemaphorePermit> {
    let mut permits = Vec::new();
    while (permits.len() as u64) < min {
        permits.push(free_slot(slots).await);
    }
    take_free_slots(slots, &mut permits, max);
    permits
}

/// Adds to `permits` as many slots as are free now, up to `max` in all.
fn take_free_slots(slots: &Arc<Semaphore>, permits: &mut Vec<OwnedSemaphorePermit>, max: u64) {
    while (permits.len() as u64) < max {
        match slots.clone().try_acquire_owned() {
            Ok(permit) => permits.push(permit),
            Err(_) => break,
        }
    }
}

fn reap(joined: Result<(), tokio::task::JoinError>) {
    if let Err(err) = joined {
        error!(error = %err, "a job task ended abnormally; its job comes back after retry_after");
    }
}

/// Resident memory of this process in megabytes, from `VmRSS` in `/proc/self/status` (0
/// where that is unavailable, so the limit never applies there). The file is read at once:
/// `read_to_string` grows its buffer from 32 bytes, a system call each time, and this runs in
/// the job loop.
fn memory_mb() -> u64 {
    use std::io::Read;
    let mut buffer = [0u8; 4096];
    let read = std::fs::File::open("/proc/self/status").and_then(|mut file| file.read(&mut buffer));
    let status = read.map_or("", |len| std::str::from_utf8(&buffer[..len]).unwrap_or(""));
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_resident_memory_is_read_from_the_process_status() {
        // A test process with a Tokio runtime holds several megabytes.
        assert!(memory_mb() >= 1, "{} MB", memory_mb());
    }

    #[test]
    fn as_many_jobs_wait_ahead_as_the_slots_start_within_the_bound() {
        let ms = Duration::from_millis;
        const WINDOW: Duration = Duration::from_millis(2);
        // No-op jobs: three rounds of the slots at most.
        assert_eq!(ahead_limit(50, Duration::from_micros(40), WINDOW), 150);
        // 5 ms of I/O each: 50 slots start 20 jobs in 2 ms.
        assert_eq!(ahead_limit(50, ms(5), WINDOW), 20);
        assert_eq!(ahead_limit(50, ms(100), WINDOW), 1);
        // Jobs longer than the slots start one of in 2 ms: none.
        assert_eq!(ahead_limit(50, ms(101), WINDOW), 0);
        assert_eq!(ahead_limit(1, ms(3), WINDOW), 0);
        assert_eq!(ahead_limit(1, ms(1), WINDOW), 2);
        assert_eq!(ahead_limit(1, Duration::ZERO, WINDOW), 3);
        // A wider window for a Redis farther away; none at all.
        assert_eq!(ahead_limit(1, ms(3), ms(10)), 3);
        assert_eq!(ahead_limit(50, ms(5), ms(10)), 100);
        assert_eq!(
            ahead_limit(50, Duration::from_micros(40), Duration::ZERO),
            0
        );
    }
}
