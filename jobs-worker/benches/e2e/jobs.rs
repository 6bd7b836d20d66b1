//! The benchmark's job types, and the tracker their handlers count themselves on, with the
//! moments a run waits for.

use redjob::{job, Job, JobContext, JobResult};
use redjob_worker::Stats;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::common::wall_us;
use crate::io_device::{io_device, record_us, IO_AWAITED_US};

/// How long a wait for the end of a run sleeps at most before it looks at its bound and the
/// worker's failures again.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// When something a run waits for happened (its last job, a batch's callback), and its waiter,
/// woken then, so that waiting costs the worker's thread no polling.
pub(crate) struct Moment {
    at: Mutex<Option<Instant>>,
    reached: tokio::sync::Notify,
}

impl Moment {
    pub(crate) const fn new() -> Self {
        Moment {
            at: Mutex::new(None),
            reached: tokio::sync::Notify::const_new(),
        }
    }

    pub(crate) fn clear(&self) {
        *self.at.lock().unwrap() = None;
    }

    pub(crate) fn mark(&self) {
        *self.at.lock().unwrap() = Some(Instant::now());
        self.reached.notify_one();
    }

    /// When it happened; `None` once `deadline` passes or `give_up` says so first, which is
    /// looked at again within every [`WAIT_SLICE`].
    pub(crate) async fn wait(
        &self,
        deadline: Instant,
        give_up: impl Fn() -> bool,
    ) -> Option<Instant> {
        loop {
            if let Some(at) = *self.at.lock().unwrap() {
                return Some(at);
            }
            if Instant::now() > deadline || give_up() {
                return None;
            }
            let _ = tokio::time::timeout(WAIT_SLICE, self.reached.notified()).await;
        }
    }
}

/// Handler calls counted by the benchmark, and the wall-clock lateness samples.
pub(crate) struct Tracker {
    done: AtomicUsize,
    target: AtomicUsize,
    finished: Moment,
    pub(crate) samples: Mutex<Vec<f64>>,
}

pub(crate) fn tracker() -> &'static Tracker {
    static TRACKER: OnceLock<Tracker> = OnceLock::new();
    TRACKER.get_or_init(|| Tracker {
        done: AtomicUsize::new(0),
        target: AtomicUsize::new(usize::MAX),
        finished: Moment::new(),
        samples: Mutex::new(Vec::new()),
    })
}

impl Tracker {
    pub(crate) fn reset(&self, target: usize) {
        self.done.store(0, Ordering::SeqCst);
        self.target.store(target, Ordering::SeqCst);
        self.finished.clear();
        self.samples.lock().unwrap().clear();
    }

    pub(crate) fn count(&self) {
        let done = self.done.fetch_add(1, Ordering::AcqRel) + 1;
        if done == self.target.load(Ordering::Acquire) {
            self.finished.mark();
        }
    }

    pub(crate) fn done(&self) -> usize {
        self.done.load(Ordering::Acquire)
    }

    /// Waits for the target count; `None` when `bound` passes first or a job failed.
    pub(crate) async fn wait_until_done(&self, bound: Duration, stats: &Stats) -> Option<Instant> {
        self.finished
            .wait(Instant::now() + bound, || stats.failed() > 0)
            .await
    }
}

/// The kit's no-op job: `{n, t}`.
#[derive(Serialize, Deserialize)]
pub(crate) struct Noop {
    pub(crate) n: u64,
    pub(crate) t: f64,
}

#[job(name = "peerkit.noop")]
impl Job for Noop {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        match ctx.try_state::<Tally>() {
            Some(tally) => tally.0.count(),
            None => tracker().count(),
        }
        Ok(())
    }
}

/// `drain --progress K`'s job: tracked, reports its progress K times, then is counted.
#[derive(Serialize, Deserialize)]
pub(crate) struct Reporting {
    pub(crate) n: u64,
    pub(crate) reports: u32,
}

#[job(name = "peerkit.reporting", track)]
impl Job for Reporting {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        for report in 1..=self.reports {
            ctx.progress(report);
        }
        tracker().count();
        Ok(())
    }
}

/// The `wait` scenario's job: tracked, returns `{n}`.
#[derive(Serialize, Deserialize)]
pub(crate) struct Answer {
    pub(crate) n: u64,
}

#[job(name = "peerkit.answer", track)]
impl Job for Answer {
    type Output = Value;

    async fn handle(&self, _ctx: &JobContext) -> JobResult<Value> {
        Ok(json!({ "n": self.n }))
    }
}

/// The application state of `--state`: where the no-op job counts itself.
pub(crate) struct Tally(pub(crate) &'static Tracker);

/// The `io` scenario's job: 5 ms of simulated I/O (awaited on the [`io_device`]), then counted.
#[derive(Serialize, Deserialize)]
pub(crate) struct Io {
    pub(crate) n: u64,
}

/// How long an [`Io`] job awaits.
pub(crate) const IO_WAIT: Duration = Duration::from_millis(5);

#[job(name = "peerkit.io")]
impl Job for Io {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        let asked = Instant::now();
        io_device().request(IO_WAIT).await;
        record_us(&IO_AWAITED_US, asked.elapsed());
        tracker().count();
        Ok(())
    }
}

/// The batch scenario's no-op job: counted, and its end recorded (wall clock, microseconds),
/// for the callback's delay after the last of them.
#[derive(Serialize, Deserialize)]
pub(crate) struct BatchNoop {
    pub(crate) n: u64,
}

/// The latest end of a [`BatchNoop`] handler, and the start of the batch's callback (wall
/// clock, microseconds; 0 until it starts).
pub(crate) static LAST_CHILD_END_US: AtomicU64 = AtomicU64::new(0);
pub(crate) static CALLBACK_START_US: AtomicU64 = AtomicU64::new(0);
/// When the batch scenario's callback started.
pub(crate) static CALLBACK_STARTED: Moment = Moment::new();

#[job(name = "peerkit.batch-noop")]
impl Job for BatchNoop {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        tracker().count();
        LAST_CHILD_END_US.fetch_max(wall_us(), Ordering::AcqRel);
        Ok(())
    }
}

/// The chain scenario's link: records when it started and ended (wall clock, microseconds).
#[derive(Serialize, Deserialize)]
pub(crate) struct ChainLink {
    pub(crate) n: usize,
}

/// Start and end of each [`ChainLink`], by its position.
pub(crate) static LINK_TIMES: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

#[job(name = "peerkit.chain-link")]
impl Job for ChainLink {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        let started = wall_us();
        let mut times = LINK_TIMES.lock().unwrap();
        if let Some(slot) = times.get_mut(self.n) {
            *slot = (started, wall_us());
        }
        drop(times);
        tracker().count();
        Ok(())
    }
}

/// The batch scenario's completion callback: records when it started.
#[derive(Serialize, Deserialize)]
pub(crate) struct BatchDone {}

#[job(name = "peerkit.batch-done")]
impl Job for BatchDone {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        CALLBACK_START_US.store(wall_us(), Ordering::Release);
        CALLBACK_STARTED.mark();
        Ok(())
    }
}

/// Milliseconds since the Unix epoch, with a fraction.
pub(crate) fn wall_ms() -> f64 {
    wall_us() as f64 / 1000.0
}

/// A job that records its lateness: handler start minus `due_ms` (wall clock, ms).
#[derive(Serialize, Deserialize)]
pub(crate) struct Timed {
    pub(crate) due_ms: f64,
}

#[job(name = "peerkit.timed")]
impl Job for Timed {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        let late = wall_ms() - self.due_ms;
        tracker().samples.lock().unwrap().push(late);
        tracker().count();
        Ok(())
    }
}

/// `fairness`'s job: counted; a quiet group's job (`dispatched_us` set) records how long it
/// waited from its dispatch to its start.
#[derive(Serialize, Deserialize)]
pub(crate) struct Tenant {
    pub(crate) n: u64,
    /// Wall clock at its dispatch, in µs; 0 for the backlog's jobs.
    pub(crate) dispatched_us: u64,
}

#[job(name = "peerkit.tenant")]
impl Job for Tenant {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        if self.dispatched_us > 0 {
            let waited_ms = wall_us().saturating_sub(self.dispatched_us) as f64 / 1000.0;
            tracker().samples.lock().unwrap().push(waited_ms);
        }
        tracker().count();
        Ok(())
    }
}
