//! End-to-end benchmark of dispatch and the worker runtime against a real Redis, in the format
//! of the side-by-side peer kit (one JSON line per run on stdout).
//!
//! ```text
//! cargo bench -p redjob-worker --bench e2e -- --scenario drain --jobs 50000 --concurrency 50 \
//!     --redis redis://127.0.0.1:PORT
//! ```
//!
//! Scenarios, as the kit defines them: `enqueue` (bulk, chunks of 1,000), `enqueue_single`
//! (min(N, 10,000) awaited dispatches; also reports the time of an awaited PING through the
//! same connection, the floor under one dispatch), `drain` (N queued no-op jobs, one worker of
//! concurrency C, timed to the N-th handler call; peak RSS), `delayed` (2,000 jobs due over
//! 5 s onto an idle worker; lateness = handler start - due), `pickup` (200 pushes, 20 ms apart,
//! onto an idle worker), `batch` (one batch of N no-op jobs with a completion callback job,
//! created untimed in a child; timed to the callback's start; `callback_ms` is the callback's
//! start minus the last job's end). Our own: `chain` (a chain of N no-op links; the gaps from
//! one link's end to the next one's start), `backlog` (drain rate with 1,000,000 queued jobs against
//! 20,000), `io` (N jobs that each await 5 ms of simulated I/O at concurrency C, completed
//! exactly on time by a thread of its own: jobs/s against the ideal of C per 5 ms, beside the
//! same requests awaited first by C bare tasks, the host's own ceiling), and `migrate`
//! (1,000,000 jobs due at one instant: the
//! slowest script call, from SLOWLOG), and, built with `--features postgres`, `txn` (dispatch
//! in a PostgreSQL transaction through the outbox, relayed by the worker; `--pg URL`) and
//! `relay` (a backlog of N jobs committed into the outbox, relayed and run), and `wait` (the
//! kit's: 200 sequential dispatches of a tracked job onto an idle worker, each awaited to its
//! result; latency = result in hand - just before the dispatch). `drain --events` turns the
//! queue's events on first; `drain --progress K` drains tracked jobs that each report their
//! progress K times; `drain --groups G` drains jobs pushed in G groups of the queue
//! (docs/groups.md). `fairness` (ours): one group with a backlog of N jobs, then 999 other
//! groups (`--groups`) push 10 jobs each while it drains: the quiet jobs' waits, dispatch to
//! start, and the drain's rate; `--plain` puts every job in the queue's own list, the baseline.
//! Redis memory per waiting job is measured from outside,
//! beside the peers', by `scripts/bench-footprint`.
//!
//! The worker is the real runtime (`redjob_worker::Worker`) with its default options but for
//! `--queue`, `--concurrency` and `--sleep`; no log subscriber is installed, as a production
//! worker logging at warning level would run. With `--state`, the worker is given application
//! state, which the no-op job reads to count itself (`ctx.try_state`): run beside a run
//! without it, the cost of state per job.

mod common;
#[cfg(feature = "postgres")]
mod txn;

use clap::Parser;
use common::{flush, nearest_rank, own_cpu_seconds, round2, wall_us};
use redjob::{job, Batch, Bulk, Chain, Job, JobContext, JobResult, PendingDispatch, RedisQueue};
use redjob_worker::Stats;
use redjob_worker::{Worker, WorkerConfig};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing::Instrument;

const QUEUE: &str = "peerkit";
const CHUNK: usize = 1000;
const SINGLE_MAX: usize = 10_000;
const DELAYED_JOBS: usize = 2000;
const PICKUP_JOBS: usize = 200;
const IDLE: Duration = Duration::from_secs(1);
const BOUND: Duration = Duration::from_secs(60);

/// Command line of the benchmark (cargo's own `--bench` flag is accepted and ignored).
#[derive(Debug, Clone, Parser)]
struct Args {
    #[arg(long, default_value = "drain")]
    scenario: String,
    #[arg(long, default_value_t = 50_000)]
    jobs: usize,
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    #[arg(long, default_value_t = 300.0)]
    timeout_s: f64,
    /// The worker's runtime threads, as the worker's `--threads` (default: one per CPU).
    #[arg(long)]
    threads: Option<std::num::NonZeroUsize>,
    /// The PostgreSQL database of the `txn` scenario (feature `postgres`).
    #[arg(long, env = "PG_URL")]
    pg: Option<String>,
    /// Give the worker application state, which the no-op job reads.
    #[arg(long)]
    state: bool,
    /// Record spans with an OpenTelemetry layer (feature `otel`), exported to nowhere, and
    /// dispatch every job inside a span, so each carries a trace context: the cost of tracing
    /// across the queue per job.
    #[arg(long)]
    otel: bool,
    /// drain: turn the queue's events on (stream of 100,000) before the worker starts.
    #[arg(long)]
    events: bool,
    /// drain: tracked jobs, each reporting its progress this many times (0: untracked no-ops).
    #[arg(long, default_value_t = 0)]
    progress: u32,
    /// drain: the jobs spread over this many groups of the queue, in even blocks (0: the
    /// queue's own list); fairness: how many groups (default 1,000).
    #[arg(long, default_value_t = 0)]
    groups: usize,
    /// fairness: every job in the queue's own list instead of groups, the baseline.
    #[arg(long)]
    plain: bool,
    #[arg(long, hide = true)]
    bench: bool,
}

/// How long a wait for the end of a run sleeps at most before it looks at its bound and the
/// worker's failures again.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// When something a run waits for happened (its last job, a batch's callback), and its waiter,
/// woken then, so that waiting costs the worker's thread no polling.
struct Moment {
    at: Mutex<Option<Instant>>,
    reached: tokio::sync::Notify,
}

impl Moment {
    const fn new() -> Self {
        Moment {
            at: Mutex::new(None),
            reached: tokio::sync::Notify::const_new(),
        }
    }

    fn clear(&self) {
        *self.at.lock().unwrap() = None;
    }

    fn mark(&self) {
        *self.at.lock().unwrap() = Some(Instant::now());
        self.reached.notify_one();
    }

    /// When it happened; `None` once `deadline` passes or `give_up` says so first, which is
    /// looked at again within every [`WAIT_SLICE`].
    async fn wait(&self, deadline: Instant, give_up: impl Fn() -> bool) -> Option<Instant> {
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
struct Tracker {
    done: AtomicUsize,
    target: AtomicUsize,
    finished: Moment,
    samples: Mutex<Vec<f64>>,
}

fn tracker() -> &'static Tracker {
    static TRACKER: OnceLock<Tracker> = OnceLock::new();
    TRACKER.get_or_init(|| Tracker {
        done: AtomicUsize::new(0),
        target: AtomicUsize::new(usize::MAX),
        finished: Moment::new(),
        samples: Mutex::new(Vec::new()),
    })
}

impl Tracker {
    fn reset(&self, target: usize) {
        self.done.store(0, Ordering::SeqCst);
        self.target.store(target, Ordering::SeqCst);
        self.finished.clear();
        self.samples.lock().unwrap().clear();
    }

    fn count(&self) {
        let done = self.done.fetch_add(1, Ordering::AcqRel) + 1;
        if done == self.target.load(Ordering::Acquire) {
            self.finished.mark();
        }
    }

    fn done(&self) -> usize {
        self.done.load(Ordering::Acquire)
    }

    /// Waits for the target count; `None` when `bound` passes first or a job failed.
    async fn wait_until_done(&self, bound: Duration, stats: &Stats) -> Option<Instant> {
        self.finished
            .wait(Instant::now() + bound, || stats.failed() > 0)
            .await
    }
}

/// The kit's no-op job: `{n, t}`.
#[derive(Serialize, Deserialize)]
struct Noop {
    n: u64,
    t: f64,
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
struct Reporting {
    n: u64,
    reports: u32,
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
struct Answer {
    n: u64,
}

#[job(name = "peerkit.answer", track)]
impl Job for Answer {
    type Output = Value;

    async fn handle(&self, _ctx: &JobContext) -> JobResult<Value> {
        Ok(json!({ "n": self.n }))
    }
}

/// The application state of `--state`: where the no-op job counts itself.
struct Tally(&'static Tracker);

/// The `io` scenario's job: 5 ms of simulated I/O (awaited on the [`io_device`]), then counted.
#[derive(Serialize, Deserialize)]
struct Io {
    n: u64,
}

/// How long an [`Io`] job awaits.
const IO_WAIT: Duration = Duration::from_millis(5);

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

/// How long each [`Io`] job's request took as its handler saw it, in µs.
static IO_AWAITED_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// How late the [`IoDevice`] completed each request after its instant, in µs.
static IO_DEVICE_LATE_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// How long each request's task took to resume once the [`IoDevice`] completed it, in µs.
static IO_WAKE_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// The samples of the requests made since the last call, summed up (ms), and cleared.
fn take_io_figures() -> Map<String, Value> {
    let mut figures = Map::new();
    for (name, samples) in [
        ("io_device_late_ms", &IO_DEVICE_LATE_US),
        ("io_wake_ms", &IO_WAKE_US),
        ("io_awaited_ms", &IO_AWAITED_US),
    ] {
        figures.insert(name.into(), mean_p50_p99_ms(samples));
        samples.lock().unwrap().clear();
    }
    figures
}

/// Adds `took` to `samples`, in µs.
fn record_us(samples: &Mutex<Vec<u64>>, took: Duration) {
    samples.lock().unwrap().push(took.as_micros() as u64);
}

/// The mean, median and p99 (by [`nearest_rank`]) of `samples`, in ms.
fn mean_p50_p99_ms(samples: &Mutex<Vec<u64>>) -> Value {
    let mut all = samples.lock().unwrap().clone();
    if all.is_empty() {
        return Value::Null;
    }
    all.sort_unstable();
    let mean = all.iter().sum::<u64>() as f64 / all.len() as f64;
    let ms = |p: f64| round2(nearest_rank(&all, p) as f64 / 1000.0);
    json!({
        "mean": round2(mean / 1000.0),
        "p50": ms(0.50),
        "p99": ms(0.99),
    })
}

/// Simulated I/O: each request completes exactly when asked, woken from a thread of its own as
/// a socket's reply would be. Tokio's timer rounds every sleep up to its next millisecond tick,
/// so `tokio::time::sleep(5 ms)` lasts 5 to 6 ms, and a scenario built on it would measure the
/// timer wheel, not the worker.
struct IoDevice {
    requests: std::sync::mpsc::Sender<IoRequest>,
}

/// A simulated I/O request: when it completes, and whom to tell.
/// (The device answers with the instant it completed the request.)
type IoRequest = (Instant, tokio::sync::oneshot::Sender<Instant>);

impl IoDevice {
    /// Completes `wait` from now.
    async fn request(&self, wait: Duration) {
        let (done, completed) = tokio::sync::oneshot::channel();
        let sent = self.requests.send((Instant::now() + wait, done));
        sent.expect("the simulated I/O thread runs as long as the process");
        let completed_at = completed
            .await
            .expect("the simulated I/O thread completes every request");
        record_us(&IO_WAKE_US, completed_at.elapsed());
    }
}

fn io_device() -> &'static IoDevice {
    static DEVICE: OnceLock<IoDevice> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let (requests, incoming) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            exact_timers();
            complete_requests(incoming)
        });
        IoDevice { requests }
    })
}

/// Lets the calling thread's timed waits end at their instant. Linux ends a sleeping thread's
/// timer up to its timer slack late (50 µs by default) so that it can wake several at once; a
/// device's reply has no such delay, and the scenario would charge it to the worker.
fn exact_timers() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The simulated I/O thread: completes each request at its instant, in instant order (two
/// requests of one instant in arrival order).
fn complete_requests(incoming: std::sync::mpsc::Receiver<IoRequest>) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut pending: BTreeMap<(Instant, u64), tokio::sync::oneshot::Sender<Instant>> =
        BTreeMap::new();
    let mut arrived = 0u64;
    loop {
        let now = Instant::now();
        while let Some(due) = pending.first_entry().filter(|entry| entry.key().0 <= now) {
            record_us(&IO_DEVICE_LATE_US, now - due.key().0);
            let _ = due.remove().send(Instant::now());
        }
        let received = match pending.keys().next() {
            Some((at, _)) => incoming.recv_timeout(at.saturating_duration_since(now)),
            None => incoming.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok((at, done)) => {
                pending.insert((at, arrived), done);
                arrived += 1;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// The batch scenario's no-op job: counted, and its end recorded (wall clock, microseconds),
/// for the callback's delay after the last of them.
#[derive(Serialize, Deserialize)]
struct BatchNoop {
    n: u64,
}

/// The latest end of a [`BatchNoop`] handler, and the start of the batch's callback (wall
/// clock, microseconds; 0 until it starts).
static LAST_CHILD_END_US: AtomicU64 = AtomicU64::new(0);
static CALLBACK_START_US: AtomicU64 = AtomicU64::new(0);
/// When the batch scenario's callback started.
static CALLBACK_STARTED: Moment = Moment::new();

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
struct ChainLink {
    n: usize,
}

/// Start and end of each [`ChainLink`], by its position.
static LINK_TIMES: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

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
struct BatchDone {}

#[job(name = "peerkit.batch-done")]
impl Job for BatchDone {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        CALLBACK_START_US.store(wall_us(), Ordering::Release);
        CALLBACK_STARTED.mark();
        Ok(())
    }
}

/// A job that records its lateness: handler start minus `due_ms` (wall clock, ms).
#[derive(Serialize, Deserialize)]
struct Timed {
    due_ms: f64,
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

/// Milliseconds since the Unix epoch, with a fraction.
fn wall_ms() -> f64 {
    wall_us() as f64 / 1000.0
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

/// Nearest-rank percentiles, as the kit computes them.
fn latency_fields(samples: &[f64]) -> Map<String, Value> {
    let mut fields = Map::new();
    if samples.is_empty() {
        return fields;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = |p: f64| nearest_rank(&s, p);
    fields.insert("p50_ms".into(), json!(round2(rank(0.50))));
    fields.insert("p99_ms".into(), json!(round2(rank(0.99))));
    fields.insert("max_ms".into(), json!(round2(s[s.len() - 1])));
    fields.insert("min_ms".into(), json!(round2(s[0])));
    fields
}

fn worker(args: &Args, queue: &RedisQueue) -> Worker {
    let config = WorkerConfig {
        queues: vec![QUEUE.to_owned()],
        concurrency: args.concurrency,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(config, queue.clone()).expect("a valid worker");
    if args.state {
        worker.state(Tally(tracker()))
    } else {
        worker
    }
}

async fn push_noops(queue: &RedisQueue, jobs: usize) -> redjob::Result<()> {
    push_in_chunks(queue, jobs, |n| Noop { n, t: 0.0 }).await
}

/// Pushes `jobs` no-op jobs spread over `groups` groups in even blocks (`g0` has the first
/// ones), in bulk dispatches of [`CHUNK`].
async fn push_grouped_noops(queue: &RedisQueue, jobs: usize, groups: usize) -> redjob::Result<()> {
    for start in (0..jobs).step_by(CHUNK) {
        let mut bulk = Bulk::via(queue);
        for n in start..(start + CHUNK).min(jobs) {
            let group = format!("g{}", n * groups / jobs);
            let job = Noop {
                n: n as u64,
                t: 0.0,
            };
            bulk.add(job.dispatch().on_queue(QUEUE).group(group))?;
        }
        bulk.send().await?;
    }
    Ok(())
}

/// `fairness`'s job: counted; a quiet group's job (`dispatched_us` set) records how long it
/// waited from its dispatch to its start.
#[derive(Serialize, Deserialize)]
struct Tenant {
    n: u64,
    /// Wall clock at its dispatch, in µs; 0 for the backlog's jobs.
    dispatched_us: u64,
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

/// How many jobs each quiet group of `fairness` pushes.
const QUIET_JOBS: usize = 10;

/// `fairness`: one group (`g0`) has a backlog of N jobs; once the worker drains it, each of the
/// other groups (`--groups`, 1,000 by default) pushes 10 jobs, one group after the other. The
/// quiet groups' waits, dispatch to start, and the drain's rate. With `--plain`, every job goes
/// to the queue's own list: the baseline, where the quiet jobs wait behind the backlog.
async fn fairness(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let groups = if args.groups == 0 {
        1000
    } else {
        args.groups.max(2)
    };
    let quiet = (groups - 1) * QUIET_JOBS;
    let place = |dispatch: PendingDispatch<Tenant>, group: usize| match args.plain {
        true => dispatch.on_queue(QUEUE),
        false => dispatch.on_queue(QUEUE).group(format!("g{group}")),
    };
    for start in (0..args.jobs).step_by(CHUNK) {
        let mut bulk = Bulk::via(queue);
        for n in start..(start + CHUNK).min(args.jobs) {
            let job = Tenant {
                n: n as u64,
                dispatched_us: 0,
            };
            bulk.add(place(job.dispatch(), 0)).map_err(error_text)?;
        }
        bulk.send().await.map_err(error_text)?;
    }
    tracker().reset(args.jobs + quiet);
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let stats = worker.stats();
    let start = Instant::now();
    let running = tokio::spawn(worker.run());
    // The quiet groups arrive while the backlog drains.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pushing = Instant::now();
    let done_before_push = tracker().done();
    for group in 1..groups {
        let mut bulk = Bulk::via(queue);
        for i in 0..QUIET_JOBS {
            let job = Tenant {
                n: (args.jobs + (group - 1) * QUIET_JOBS + i) as u64,
                dispatched_us: wall_us(),
            };
            bulk.add(place(job.dispatch(), group)).map_err(error_text)?;
        }
        bulk.send().await.map_err(error_text)?;
    }
    let push_ms = pushing.elapsed().as_secs_f64() * 1000.0;
    let done_while_pushing = tracker().done() - done_before_push;
    let bound = Duration::from_secs_f64(args.timeout_s);
    let finished = tracker().wait_until_done(bound, &stats).await;
    stop.cancel();
    stopped(running).await?;
    let samples = tracker().samples.lock().unwrap().clone();
    let mut out = Map::new();
    out.insert("groups".into(), json!(groups));
    out.insert("plain".into(), json!(args.plain));
    out.insert("quiet_jobs".into(), json!(quiet));
    out.insert("quiet_push_ms".into(), json!(round2(push_ms)));
    out.insert("done_before_push".into(), json!(done_before_push));
    out.insert("done_while_pushing".into(), json!(done_while_pushing));
    out.insert("concurrency".into(), json!(args.concurrency));
    match finished {
        Some(at) => {
            let secs = (at - start).as_secs_f64();
            out.extend(throughput(args.jobs + quiet, secs));
        }
        None => {
            out.insert("error".into(), json!("bound reached"));
        }
    }
    out.extend(latency_fields(&samples));
    Ok(out)
}

/// Pushes `jobs` jobs made by `make` from their number onto the kit's queue, in bulk
/// dispatches of [`CHUNK`].
async fn push_in_chunks<J: Job>(
    queue: &RedisQueue,
    jobs: usize,
    make: impl Fn(u64) -> J,
) -> redjob::Result<()> {
    let pushes = async {
        for start in (0..jobs).step_by(CHUNK) {
            let mut bulk = Bulk::via(queue);
            for n in start..(start + CHUNK).min(jobs) {
                bulk.add(PendingDispatch::new(make(n as u64)).on_queue(QUEUE))?;
            }
            bulk.send().await?;
        }
        Ok(())
    };
    // With --otel, each job's payload carries this span's context.
    pushes.instrument(tracing::info_span!("dispatching")).await
}

/// Pre-fills the queue in a child process, so the worker's peak RSS is its own: with no-op
/// jobs (`prep`) or one batch of them (`prep-batch`).
fn prep_in_child(args: &Args, jobs: usize) {
    prep_child(args, "prep", jobs)
}

fn prep_child(args: &Args, prep: &str, jobs: usize) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--scenario",
            prep,
            "--jobs",
            &jobs.to_string(),
            "--redis",
            &args.redis,
        ])
        .args(args.otel.then_some("--otel"))
        .args(["--progress", &args.progress.to_string()])
        .args(["--groups", &args.groups.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("cannot run the prep child");
    assert!(status.success(), "the prep child failed: {status}");
}

/// Times one worker draining `jobs` queued jobs; returns (jobs/s, seconds).
async fn timed_drain(args: &Args, queue: &RedisQueue, jobs: usize) -> Result<(f64, f64), String> {
    let (secs, (stop, running)) = run_until_done(args, worker(args, queue), jobs).await?;
    stop.cancel();
    stopped(running).await?;
    Ok((jobs as f64 / secs, secs))
}

/// A running worker: its stop token and its task.
type Running = (
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<redjob_worker::Exit, redjob_worker::WorkerError>>,
);

/// Starts `worker` and waits until `jobs` jobs have run (within `--timeout-s`): the seconds
/// from its start to the last one's, and the worker, still running. One that falls short is
/// stopped, and says how short.
async fn run_until_done(
    args: &Args,
    worker: Worker,
    jobs: usize,
) -> Result<(f64, Running), String> {
    tracker().reset(jobs);
    let start = Instant::now();
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());
    let bound = Duration::from_secs_f64(args.timeout_s);
    match tracker().wait_until_done(bound, &stats).await {
        Some(at) => Ok(((at - start).as_secs_f64(), (stop, running))),
        None => {
            stop.cancel();
            stopped(running).await?;
            Err(format!(
                "only {} of {jobs} jobs ran within {bound:?}",
                tracker().done()
            ))
        }
    }
}

async fn scenario(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    match args.scenario.as_str() {
        "prep" if args.progress > 0 => {
            let reports = args.progress;
            push_in_chunks(queue, args.jobs, |n| Reporting { n, reports })
                .await
                .map_err(error_text)?;
            Ok(Map::new())
        }
        "prep" if args.groups > 0 => {
            push_grouped_noops(queue, args.jobs, args.groups)
                .await
                .map_err(error_text)?;
            Ok(Map::new())
        }
        "prep" => {
            push_noops(queue, args.jobs).await.map_err(error_text)?;
            Ok(Map::new())
        }
        "fairness" => fairness(args, queue).await,
        "wait" => wait(args, queue).await,
        "prep-batch" => {
            dispatch_batch(queue, args.jobs).await?;
            Ok(Map::new())
        }
        "chain" => chain(args, queue).await,
        "batch" => batch(args, queue).await,
        "enqueue" => enqueue(args, queue).await,
        "enqueue_single" => enqueue_single(args, queue).await,
        "drain" => drain(args, queue).await,
        "io" => io(args, queue).await,
        "delayed" => lateness(args, queue, Arrival::Delayed).await,
        "pickup" => lateness(args, queue, Arrival::Pickup).await,
        "backlog" => backlog(args, queue).await,
        "migrate" => migrate(args, queue).await,
        #[cfg(feature = "postgres")]
        "txn" => txn::txn(args, queue).await,
        #[cfg(feature = "postgres")]
        "relay" => txn::relay(args, queue).await,
        other => Err(format!("unknown scenario {other:?}")),
    }
}

/// Waits for a stopped worker's task; a worker that could not start says why.
async fn stopped(
    running: tokio::task::JoinHandle<Result<redjob_worker::Exit, redjob_worker::WorkerError>>,
) -> Result<(), String> {
    match running.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(format!("the worker could not start: {err}")),
        Err(err) => Err(format!("the worker task ended abnormally: {err}")),
    }
}

fn error_text(e: redjob::Error) -> String {
    e.to_string()
}

/// One batch of `jobs` [`BatchNoop`]s with [`BatchDone`] as its completion callback.
async fn dispatch_batch(queue: &RedisQueue, jobs: usize) -> Result<(), String> {
    Batch::new()
        .name("peerkit")
        .jobs((0..jobs as u64).map(|n| BatchNoop { n }.dispatch().on_queue(QUEUE)))
        .then(BatchDone {}.dispatch().on_queue(QUEUE))
        .via(queue)
        .dispatch()
        .await
        .map_err(error_text)?;
    Ok(())
}

async fn chain(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let links = args.jobs;
    *LINK_TIMES.lock().unwrap() = vec![(0, 0); links];
    dispatch_chain(queue, links).await?;
    tracker().reset(links);
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());
    let finished = tracker()
        .wait_until_done(Duration::from_secs_f64(args.timeout_s), &stats)
        .await;
    stop.cancel();
    stopped(running).await?;
    if finished.is_none() {
        return Err(format!("only {} of {links} links ran", tracker().done()));
    }
    let mut out = Map::new();
    out.insert("jobs".into(), json!(links));
    out.insert("concurrency".into(), json!(args.concurrency));
    let fields = latency_fields(&link_gaps_ms());
    for (name, value) in fields {
        out.insert(format!("gap_{name}"), value);
    }
    Ok(out)
}

async fn dispatch_chain(queue: &RedisQueue, links: usize) -> Result<(), String> {
    let mut chain = Chain::new(ChainLink { n: 0 }.dispatch().on_queue(QUEUE));
    for n in 1..links {
        chain = chain.then(ChainLink { n }.dispatch().on_queue(QUEUE));
    }
    chain.via(queue).dispatch().await.map_err(error_text)?;
    Ok(())
}

/// From one link's end to the next one's start, in milliseconds.
fn link_gaps_ms() -> Vec<f64> {
    let times = LINK_TIMES.lock().unwrap().clone();
    times
        .windows(2)
        .map(|pair| (pair[1].0 as f64 - pair[0].1 as f64) / 1000.0)
        .collect()
}

async fn batch(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    prep_child(args, "prep-batch", args.jobs);
    tracker().reset(args.jobs);
    CALLBACK_START_US.store(0, Ordering::Release);
    CALLBACK_STARTED.clear();
    let cpu = CpuReading::take(queue).await?;
    let worker = worker(args, queue);
    let start = Instant::now();
    let stop = worker.stop_token();
    let running = tokio::spawn(worker.run());
    let deadline = start + Duration::from_secs_f64(args.timeout_s);
    let started = CALLBACK_STARTED.wait(deadline, || false).await;
    let secs = started
        .map_or(start.elapsed(), |at| at - start)
        .as_secs_f64();
    stop.cancel();
    stopped(running).await?;
    let callback = CALLBACK_START_US.load(Ordering::Acquire);
    if callback == 0 {
        return Err(format!(
            "the callback did not run within {:?}; {} of {} jobs ran",
            deadline - start,
            tracker().done(),
            args.jobs
        ));
    }
    let last_child = LAST_CHILD_END_US.load(Ordering::Acquire);
    let mut out = throughput(args.jobs, secs);
    out.extend(cpu.since(queue, args.jobs, secs).await?);
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert(
        "callback_ms".into(),
        json!(round2((callback as f64 - last_child as f64) / 1000.0)),
    );
    out.insert("rss_mb".into(), json!(peak_rss_mb()));
    if args.events {
        out.insert("events".into(), json!(true));
    }
    if args.progress > 0 {
        out.insert("progress_reports".into(), json!(args.progress));
    }
    Ok(out)
}

/// `wait`: 200 sequential round trips onto an idle worker, each a tracked dispatch awaited to
/// its result, which must be the job's `{n}`.
async fn wait(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let running = tokio::spawn(worker.run());
    tokio::time::sleep(IDLE).await;
    let (mut samples, mut wrong, mut error) = (Vec::new(), 0, None);
    let first = Instant::now();
    for n in 0..PICKUP_JOBS as u64 {
        let left = BOUND.saturating_sub(first.elapsed());
        if left.is_zero() {
            error = Some("bound reached".to_owned());
            break;
        }
        let t0 = Instant::now();
        let dispatched = Answer { n }
            .dispatch()
            .on_queue(QUEUE)
            .via(queue)
            .track()
            .await;
        let answer = match dispatched {
            Ok(job) => job.wait(left).await.map_err(|e| e.to_string()),
            Err(e) => Err(error_text(e)),
        };
        match answer {
            Ok(answer) => {
                samples.push(t0.elapsed().as_secs_f64() * 1000.0);
                wrong += usize::from(answer != json!({ "n": n }));
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    stop.cancel();
    stopped(running).await?;
    let mut out = Map::new();
    out.insert("jobs".into(), json!(PICKUP_JOBS));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("completed".into(), json!(samples.len()));
    out.extend(latency_fields(&samples));
    if wrong > 0 {
        out.insert("wrong_result".into(), json!(wrong));
    }
    if let Some(error) = error {
        out.insert("error".into(), json!(error));
    }
    Ok(out)
}

/// `jobs`, `jobs_per_sec` and `elapsed_s` of `jobs` done in `secs`.
fn throughput(jobs: usize, secs: f64) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("jobs".into(), json!(jobs));
    out.insert("jobs_per_sec".into(), json!((jobs as f64 / secs).round()));
    out.insert("elapsed_s".into(), json!(round2(secs)));
    out
}

async fn enqueue(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let start = Instant::now();
    push_noops(queue, args.jobs).await.map_err(error_text)?;
    Ok(throughput(args.jobs, start.elapsed().as_secs_f64()))
}

async fn enqueue_single(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let jobs = args.jobs.min(SINGLE_MAX);
    let secs = awaited_dispatches(queue, jobs).await?;
    let ping_secs = awaited_pings(queue, jobs).await?;
    let micros_each = |seconds: f64| round2(seconds * 1e6 / jobs as f64);
    let mut out = throughput(jobs, secs);
    out.insert("dispatch_us".into(), json!(micros_each(secs)));
    out.insert("ping_us".into(), json!(micros_each(ping_secs)));
    Ok(out)
}

/// Dispatches `jobs` no-op jobs one at a time, each awaited; returns the seconds they took.
async fn awaited_dispatches(queue: &RedisQueue, jobs: usize) -> Result<f64, String> {
    let start = Instant::now();
    for n in 0..jobs {
        Noop {
            n: n as u64,
            t: 0.0,
        }
        .dispatch()
        .on_queue(QUEUE)
        .via(queue)
        .await
        .map_err(error_text)?;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The floor under one awaited dispatch: as many PINGs, each awaited, through the same
/// connection from the same caller; returns the seconds they took.
async fn awaited_pings(queue: &RedisQueue, pings: usize) -> Result<f64, String> {
    let mut conn = queue.connection();
    let start = Instant::now();
    for _ in 0..pings {
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed().as_secs_f64())
}

async fn drain(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    if args.events {
        queue
            .set_events(QUEUE, Some(100_000))
            .await
            .map_err(error_text)?;
    }
    prep_in_child(args, args.jobs);
    let cpu = CpuReading::take(queue).await?;
    let (_, secs) = timed_drain(args, queue, args.jobs).await?;
    let mut out = throughput(args.jobs, secs);
    out.extend(cpu.since(queue, args.jobs, secs).await?);
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("rss_mb".into(), json!(peak_rss_mb()));
    Ok(out)
}

/// This process's and Redis's CPU time so far, and Redis's time in each command.
struct CpuReading {
    own: f64,
    redis: f64,
    commands: BTreeMap<String, u64>,
}

impl CpuReading {
    async fn take(queue: &RedisQueue) -> Result<Self, String> {
        Ok(CpuReading {
            commands: redis_command_usec(queue).await.map_err(error_text)?,
            redis: redis_cpu_seconds(queue).await.map_err(error_text)?,
            own: own_cpu_seconds(),
        })
    }

    /// The CPU this process and Redis spent since this reading, per job of `jobs` done in
    /// `secs`, and their utilisation of the machine's cores over those seconds: 1.0 is every
    /// core busy the whole time.
    async fn since(
        &self,
        queue: &RedisQueue,
        jobs: usize,
        secs: f64,
    ) -> Result<Map<String, Value>, String> {
        let own = own_cpu_seconds() - self.own;
        let redis = redis_cpu_seconds(queue).await.map_err(error_text)? - self.redis;
        let per_job_us = |seconds: f64| round2(seconds * 1e6 / jobs as f64);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut out = Map::new();
        out.insert("redis_cpu_us_per_job".into(), json!(per_job_us(redis)));
        // Where Redis's time went: each command's µs per job (a script's include the commands
        // it calls, which are listed again by name), the larger ones only.
        let mut commands = Map::new();
        for (command, usec) in redis_command_usec(queue).await.map_err(error_text)? {
            let spent = usec.saturating_sub(self.commands.get(&command).copied().unwrap_or(0));
            let us = round2(spent as f64 / jobs as f64);
            if us >= 0.05 {
                commands.insert(command, json!(us));
            }
        }
        out.insert("redis_command_us_per_job".into(), Value::Object(commands));
        out.insert("worker_cpu_us_per_job".into(), json!(per_job_us(own)));
        out.insert("cores".into(), json!(cores));
        out.insert(
            "cpu_utilisation".into(),
            json!(round2((own + redis) / (secs * cores as f64))),
        );
        Ok(out)
    }
}

/// `io`: N queued jobs that each await 5 ms of simulated I/O, one worker of concurrency C,
/// timed to the N-th job's end; the ideal is C jobs per 5 ms.
async fn io(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    push_in_chunks(queue, args.jobs, |n| Io { n })
        .await
        .map_err(error_text)?;
    let ideal = args.concurrency as f64 / IO_WAIT.as_secs_f64();
    let (bare_rate, mut bare) = bare_io(args.jobs, args.concurrency).await;
    let cpu = CpuReading::take(queue).await?;
    let (rate, secs) = timed_drain(args, queue, args.jobs).await?;
    let mut out = throughput(args.jobs, secs);
    out.extend(cpu.since(queue, args.jobs, secs).await?);
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("ideal_jobs_per_sec".into(), json!(ideal.round()));
    out.insert("of_ideal".into(), json!(round2(rate / ideal)));
    // Where a slot's time beyond the 5 ms goes: the simulated device's own lateness, the
    // wake-up of the job's task once the device completed, and the wait as the handler saw it
    // (both, and the 5 ms).
    out.extend(take_io_figures());
    bare.insert("of_ideal".into(), json!(round2(bare_rate / ideal)));
    out.insert("bare".into(), Value::Object(bare));
    Ok(out)
}

/// The host's own ceiling for the `io` scenario, measured before the worker runs: `jobs`
/// requests to the same simulated device, awaited by `concurrency` bare tasks of the same
/// runtime, with no queue and no worker. Returns their rate (requests/s) and
/// [`take_io_figures`].
async fn bare_io(jobs: usize, concurrency: usize) -> (f64, Map<String, Value>) {
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let requests = jobs / concurrency + usize::from(task < jobs % concurrency);
            tokio::spawn(async move {
                for _ in 0..requests {
                    let asked = Instant::now();
                    io_device().request(IO_WAIT).await;
                    record_us(&IO_AWAITED_US, asked.elapsed());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a bare I/O task does not panic");
    }
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    (rate, take_io_figures())
}

/// How the lateness scenarios hand their [`Timed`] jobs to the idle worker.
#[derive(Clone, Copy, PartialEq)]
enum Arrival {
    /// `delayed`: one bulk of jobs due over 5 s, starting 500 ms after the push.
    Delayed,
    /// `pickup`: jobs due at once, pushed one by one 20 ms apart.
    Pickup,
}

async fn lateness(
    args: &Args,
    queue: &RedisQueue,
    arrival: Arrival,
) -> Result<Map<String, Value>, String> {
    let jobs = match arrival {
        Arrival::Delayed => DELAYED_JOBS,
        Arrival::Pickup => PICKUP_JOBS,
    };
    tracker().reset(jobs);
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());
    tokio::time::sleep(IDLE).await;
    let mut out = Map::new();
    let base = wall_ms().floor();
    let add_start = Instant::now();
    match arrival {
        Arrival::Delayed => {
            push_delayed(queue, jobs, base).await?;
            let add_ms = add_start.elapsed().as_secs_f64() * 1000.0;
            out.insert("add_ms".into(), json!(round2(add_ms)));
        }
        Arrival::Pickup => push_pickups(queue, jobs).await?,
    }
    let finished = tracker()
        .wait_until_done(BOUND.saturating_sub(add_start.elapsed()), &stats)
        .await;
    stop.cancel();
    stopped(running).await?;
    let samples = tracker().samples.lock().unwrap().clone();
    out.insert("jobs".into(), json!(jobs));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("completed".into(), json!(samples.len()));
    if arrival == Arrival::Delayed {
        let early = samples.iter().filter(|l| **l < 0.0).count();
        out.insert("early".into(), json!(early));
    }
    out.extend(latency_fields(&samples));
    if finished.is_none() {
        out.insert("error".into(), json!("bound reached"));
    }
    Ok(out)
}

/// One bulk of `jobs` [`Timed`] jobs, due evenly over 5 s from 500 ms after `base_ms`.
async fn push_delayed(queue: &RedisQueue, jobs: usize, base_ms: f64) -> Result<(), String> {
    let mut bulk = Bulk::via(queue);
    for i in 0..jobs {
        let due_ms = base_ms + 500.0 + ((i * 5000) / jobs) as f64;
        let due = chrono::DateTime::from_timestamp_millis(due_ms as i64).unwrap();
        bulk.add(Timed { due_ms }.dispatch().on_queue(QUEUE).delay(due))
            .map_err(error_text)?;
    }
    bulk.send().await.map_err(error_text)?;
    Ok(())
}

/// `jobs` [`Timed`] jobs due at once, each dispatched 20 ms after the one before.
async fn push_pickups(queue: &RedisQueue, jobs: usize) -> Result<(), String> {
    for _ in 0..jobs {
        let t = wall_ms();
        Timed { due_ms: t }
            .dispatch()
            .on_queue(QUEUE)
            .via(queue)
            .await
            .map_err(error_text)?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn backlog(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let mut rates = Vec::new();
    for jobs in [20_000, 1_000_000] {
        flush(queue).await?;
        prep_in_child(args, jobs);
        let (rate, _) = timed_drain(args, queue, jobs).await?;
        rates.push(rate);
    }
    let mut out = Map::new();
    out.insert("jobs".into(), json!(1_000_000));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("jobs_per_sec".into(), json!(rates[1].round()));
    out.insert("jobs_per_sec_20k".into(), json!(rates[0].round()));
    out.insert("ratio_1m_to_20k".into(), json!(round2(rates[1] / rates[0])));
    Ok(out)
}

async fn migrate(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let jobs = 1_000_000;
    fill_delayed_all_due(queue, jobs).await?;
    reset_slowlog(queue).await?;
    let (rate, secs) = timed_drain(args, queue, jobs).await?;
    let slow = queue_calls_in_slowlog(queue).await?;
    let mut out = Map::new();
    out.insert("jobs".into(), json!(jobs));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("jobs_per_sec".into(), json!(rate.round()));
    out.insert("elapsed_s".into(), json!(round2(secs)));
    let micros = |e: &Value| e["us"].as_i64().unwrap_or(0);
    let over_20ms = slow.iter().filter(|e| micros(e) > 20_000).count();
    let slowest = slow.iter().max_by_key(|e| micros(e)).cloned();
    out.insert("calls_over_1ms".into(), json!(slow.len()));
    out.insert("calls_over_20ms".into(), json!(over_20ms));
    out.insert("slowest_call".into(), json!(slowest));
    Ok(out)
}

/// Writes `jobs` no-op jobs straight into the delayed set, all due at the same past instant.
async fn fill_delayed_all_due(queue: &RedisQueue, jobs: usize) -> Result<(), String> {
    let payload = Noop { n: 0, t: 0.0 }
        .dispatch()
        .on_queue(QUEUE)
        .envelope()
        .map_err(error_text)?
        .payload;
    for start in (0..jobs).step_by(10_000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg("queues:peerkit:delayed");
        for n in start..start + 10_000 {
            // Members differ by their uuid alone.
            zadd.arg(1.0).arg(payload.replacen(
                &payload[9..45],
                &format!("00000000-0000-4000-8000-{n:012}"),
                1,
            ));
        }
        queue.query::<()>(&zadd).await.map_err(error_text)?;
    }
    Ok(())
}

/// Logs every call of 1 ms or more from here on, and empties the log.
async fn reset_slowlog(queue: &RedisQueue) -> Result<(), String> {
    let _: () = queue
        .query(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("slowlog-log-slower-than")
                .arg(1_000)
                .arg("slowlog-max-len")
                .arg(100_000),
        )
        .await
        .map_err(error_text)?;
    queue
        .query(redis::cmd("SLOWLOG").arg("RESET"))
        .await
        .map_err(error_text)
}

/// The SLOWLOG's entries, as [`slowlog_entries`], but for the benchmark's own SLOWLOG and
/// CONFIG calls, which are not queue operations.
async fn queue_calls_in_slowlog(queue: &RedisQueue) -> Result<Vec<Value>, String> {
    let slow: Vec<Value> = queue
        .query::<redis::Value>(redis::cmd("SLOWLOG").arg("GET").arg(100_000))
        .await
        .map(|v| slowlog_entries(&v))
        .map_err(error_text)?;
    Ok(slow
        .into_iter()
        .filter(|e| {
            let command = e["command"].as_str().unwrap_or("").to_ascii_uppercase();
            !command.starts_with("SLOWLOG") && !command.starts_with("CONFIG")
        })
        .collect())
}

/// CPU time Redis has used so far (user + system), from `INFO cpu`.
async fn redis_cpu_seconds(queue: &RedisQueue) -> redjob::Result<f64> {
    let info: String = queue.query(redis::cmd("INFO").arg("cpu")).await?;
    Ok(info
        .lines()
        .filter_map(|l| {
            l.strip_prefix("used_cpu_user:")
                .or_else(|| l.strip_prefix("used_cpu_sys:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum())
}

/// The microseconds Redis has spent in each command so far, from `INFO commandstats`.
async fn redis_command_usec(queue: &RedisQueue) -> redjob::Result<BTreeMap<String, u64>> {
    let info: String = queue.query(redis::cmd("INFO").arg("commandstats")).await?;
    Ok(info
        .lines()
        .filter_map(|line| {
            let (command, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let usec = stats
                .split(',')
                .find_map(|field| field.strip_prefix("usec="))?
                .parse()
                .ok()?;
            Some((command.to_owned(), usec))
        })
        .collect())
}

/// SLOWLOG entries as `{"us": duration, "command": first word}`.
fn slowlog_entries(reply: &redis::Value) -> Vec<Value> {
    let redis::Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let redis::Value::Array(fields) = entry else {
                return None;
            };
            let us = match fields.get(2)? {
                redis::Value::Int(us) => *us,
                _ => return None,
            };
            let command = match fields.get(3)? {
                redis::Value::Array(words) => words
                    .iter()
                    .take(2)
                    .filter_map(|w| match w {
                        redis::Value::BulkString(b) => {
                            Some(String::from_utf8_lossy(b).into_owned())
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            };
            Some(json!({ "us": us, "command": command }))
        })
        .collect()
}

fn main() {
    let args = Args::parse();
    let _tracing = args.otel.then(otel::record_spans);
    let runtime = redjob_worker::async_runtime(args.threads).expect("a tokio runtime");
    let result = runtime.block_on(async {
        let queue = RedisQueue::open(&args.redis).map_err(|e| e.to_string())?;
        scenario(&args, &queue).await
    });
    if args.scenario.starts_with("prep") {
        if let Err(e) = result {
            eprintln!("prep failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut line = common::result_line(&args.scenario, result);
    let options = match args.threads {
        Some(threads) => format!("--threads {threads}"),
        None => "default options".to_owned(),
    };
    line.insert(
        "config".into(),
        json!(format!(
            "real worker runtime, {options}, no log subscriber; bulk dispatch in chunks of 1000"
        )),
    );
    line.insert(
        "version".into(),
        json!(format!("redjob {}", env!("CARGO_PKG_VERSION"))),
    );
    println!("{}", Value::Object(line));
}

/// `--otel`: spans recorded through OpenTelemetry and dropped at export.
#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    #[derive(Debug)]
    struct Discard;

    impl SpanExporter for Discard {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            Ok(())
        }
    }

    /// Installs the layer; the provider exports in batches, from its own thread, until dropped.
    pub(super) fn record_spans() -> SdkTracerProvider {
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(Discard)
            .build();
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")))
            .init();
        provider
    }
}

#[cfg(not(feature = "otel"))]
mod otel {
    pub(super) fn record_spans() {
        eprintln!("--otel needs the feature otel: cargo bench --features otel");
        std::process::exit(2);
    }
}
