//! Fault injection: worker processes killed with SIGKILL in the middle of a load or while their
//! jobs hold funnel slots and locks, many workers on the same queues, and Redis killed,
//! restarted, stalled and cut off while producers and workers run. Each test counts the runs of every job it dispatched (the `record` job appends
//! one entry per run to a Redis list) and prints its figures; see them with
//! `cargo test -p tests --test fault_injection -- --nocapture`.

use examples::{Record, Sleep};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redjob::queue::keys::QueueKeys;
use redjob::{Bulk, Error, Payload, QueueConfig, RedisQueue};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tests::records::{records_len, runs_by_uuid, wait_for_runs};
use tests::worker_process::WorkerProcess;
use tests::{sent_in_bulk, wait_for, wait_until, SentVia, TestRedis};

/// The longest any one wait of these tests may take: generous, for a loaded CI machine.
const LONG: Duration = Duration::from_secs(60);

/// Options of a Redis server that keeps every acknowledged write across a crash.
const DURABLE: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

fn start_worker(redis: &TestRedis, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis.url(), args)
}

/// Dispatches `count` record jobs to `queue_name`, in bulks of 5,000; returns their uuids.
async fn dispatch_records(queue: &RedisQueue, queue_name: &str, count: usize) -> Vec<String> {
    let mut uuids = Vec::with_capacity(count);
    while uuids.len() < count {
        let jobs = (0..(count - uuids.len()).min(5_000))
            .map(|_| Record { due_ms: 0 }.dispatch().on_queue(queue_name));
        uuids.extend(sent_in_bulk(queue, jobs).await);
    }
    uuids
}

/// Dispatches `count` record jobs, trying each one again after an error until it returns Ok: a
/// handle's first command after its connection was cut can fail with "broken pipe" (whether
/// it reached Redis is unknown, so the handle does not repeat it by itself).
async fn dispatch_records_retrying(queue: &RedisQueue, count: usize) -> Vec<String> {
    let mut uuids = Vec::with_capacity(count);
    for _ in 0..count {
        let uuid = wait_for(LONG, "a dispatch returned Ok", || async {
            Record { due_ms: 0 }.dispatch().via(queue).await.ok()
        })
        .await;
        uuids.push(uuid.to_string());
    }
    uuids
}

/// Jobs not yet settled on these queues: ready, delayed or reserved.
async fn jobs_left(queue: &RedisQueue, names: &[&str]) -> u64 {
    let mut left = 0;
    for name in names {
        match queue.size(name).await {
            Ok(size) => left += size.total(),
            // Unknown yet (the handle is reconnecting): not settled.
            Err(_) => return u64::MAX,
        }
    }
    left
}

/// Waits until every job on these queues is settled.
async fn wait_settled(queue: &RedisQueue, names: &[&str]) {
    wait_until(LONG, "every job is settled", || async {
        jobs_left(queue, names).await == 0
    })
    .await;
}

/// The uuids of the jobs whose reservations `queue_name`'s reserved set holds.
async fn reserved_uuids(conn: &mut MultiplexedConnection, queue_name: &str) -> HashSet<String> {
    let members: Vec<String> = conn
        .zrange(QueueKeys::new(queue_name).reserved, 0, -1)
        .await
        .expect("ZRANGE answers");
    members
        .iter()
        .map(|member| {
            Payload::from_json(member)
                .expect("a reserved job payload")
                .uuid
                .to_string()
        })
        .collect()
}

async fn failed_count(conn: &mut MultiplexedConnection) -> usize {
    conn.hlen("failed_jobs").await.expect("HLEN answers")
}

/// What the records say about a set of dispatched jobs.
#[derive(Debug, Default)]
struct Tally {
    /// Jobs that ran at least once.
    ran: usize,
    /// Runs recorded in all, of the dispatched jobs.
    runs: usize,
    /// Jobs that ran more than once, with how many times.
    duplicates: HashMap<String, usize>,
    /// Dispatched jobs that never ran.
    lost: Vec<String>,
}

impl Tally {
    fn of(dispatched: &[String], runs: &HashMap<String, Vec<u64>>) -> Tally {
        let mut tally = Tally::default();
        for uuid in dispatched {
            match runs.get(uuid).map_or(0, Vec::len) {
                0 => tally.lost.push(uuid.clone()),
                n => {
                    tally.ran += 1;
                    tally.runs += n;
                    if n > 1 {
                        tally.duplicates.insert(uuid.clone(), n);
                    }
                }
            }
        }
        tally
    }

    fn assert_nothing_lost(&self) {
        assert!(
            self.lost.is_empty(),
            "{} jobs never ran, e.g. {:?}",
            self.lost.len(),
            &self.lost[..self.lost.len().min(5)]
        );
    }
}

/// Warnings and errors the worker logged after its first `skip` lines.
fn warnings_since(worker: &WorkerProcess, skip: usize) -> Vec<String> {
    worker
        .lines()
        .into_iter()
        .skip(skip)
        .filter(|line| line.contains(r#""level":"WARN""#) || line.contains(r#""level":"ERROR""#))
        .collect()
}

fn assert_no_panic(worker: &WorkerProcess) {
    let panics: Vec<String> = worker
        .lines()
        .into_iter()
        .filter(|line| line.contains("panicked"))
        .collect();
    assert!(panics.is_empty(), "the worker panicked: {panics:?}");
}

/// Stops a worker with SIGTERM; it must exit with status 0.
async fn stop(worker: &mut WorkerProcess) {
    worker.signal("TERM");
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
}

const KILL_LOAD: usize = 2_000;
const KILLS: usize = 3;
const KILL_CONCURRENCY: usize = 10;

#[tokio::test]
async fn workers_killed_mid_load_lose_nothing_and_rerun_only_jobs_in_flight() {
    let started = Instant::now();
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let uuids = dispatch_records(&queue, "default", KILL_LOAD).await;
    let concurrency = KILL_CONCURRENCY.to_string();
    // A short retry_after brings the killed workers' jobs back quickly; the timeout stays far
    // above a record job's run time, so that no job runs twice but for a kill; tries allow a
    // job to be in flight at every kill and still run.
    let args = [
        "--concurrency",
        &concurrency,
        "--retry-after",
        "6",
        "--timeout",
        "5",
        "--tries",
        "10",
        "--sleep",
        "1",
    ];

    let mut worker = start_worker(&redis, &args);
    let mut in_flight_at_kills: Vec<HashSet<String>> = Vec::new();
    for kill in 1..=KILLS {
        let threshold = kill * KILL_LOAD / (KILLS + 1);
        wait_for_runs(&conn, threshold, LONG).await;
        worker.kill();
        // With its worker dead, the reserved set holds exactly the jobs it was running or had
        // finished without acknowledging yet: the jobs in flight.
        let recorded = records_len(&mut conn).await;
        let in_flight = reserved_uuids(&mut conn, "default").await;
        println!(
            "kill {kill}: SIGKILL after {recorded} of {KILL_LOAD} runs recorded, {} jobs in flight",
            in_flight.len()
        );
        assert!(
            recorded < KILL_LOAD,
            "kill {kill} came after the load had finished"
        );
        in_flight_at_kills.push(in_flight);
        worker = start_worker(&redis, &args);
    }
    wait_settled(&queue, &["default"]).await;
    stop(&mut worker).await;

    let runs = runs_by_uuid(&mut conn).await;
    let tally = Tally::of(&uuids, &runs);
    let in_flight_total: usize = in_flight_at_kills.iter().map(HashSet::len).sum();
    let extra_runs: usize = tally.duplicates.values().map(|n| n - 1).sum();
    println!(
        "kill -9 x{KILLS}: jobs {KILL_LOAD}, ran {}, runs {}, duplicates {} ({extra_runs} extra runs), \
         in flight at the kills {in_flight_total}, lost {}, failed {}, {:.1} s",
        tally.ran,
        tally.runs,
        tally.duplicates.len(),
        tally.lost.len(),
        failed_count(&mut conn).await,
        started.elapsed().as_secs_f64()
    );
    tally.assert_nothing_lost();
    assert_eq!(
        runs.len(),
        KILL_LOAD,
        "runs were recorded for jobs never dispatched"
    );
    for (uuid, n) in &tally.duplicates {
        let kills_in_flight = in_flight_at_kills
            .iter()
            .filter(|in_flight| in_flight.contains(uuid))
            .count();
        assert!(
            n - 1 <= kills_in_flight,
            "job {uuid} ran {n} times but was in flight at {kills_in_flight} kills"
        );
    }
    assert!(extra_runs <= in_flight_total);
    assert_eq!(failed_count(&mut conn).await, 0, "no job failed");
}

const WORKERS: usize = 4;
const MANY_JOBS: usize = 50_000;

#[tokio::test]
async fn four_workers_on_the_same_queues_run_each_of_50_000_jobs_exactly_once() {
    let started = Instant::now();
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let mut workers: Vec<WorkerProcess> = (0..WORKERS)
        .map(|_| start_worker(&redis, &["--queue", "high,default", "--concurrency", "10"]))
        .collect();
    for worker in &workers {
        worker.wait_started().await;
    }

    // Both queues fill while the workers drain them.
    let mut uuids = Vec::with_capacity(MANY_JOBS);
    for round in 0..MANY_JOBS / 5_000 {
        let name = if round % 2 == 0 { "default" } else { "high" };
        uuids.extend(dispatch_records(&queue, name, 5_000).await);
    }
    let dispatched_in = started.elapsed();
    wait_until(
        Duration::from_secs(180),
        format!("{MANY_JOBS} runs are recorded and every job is settled"),
        || async {
            records_len(&mut redis.conn().await).await >= MANY_JOBS
                && jobs_left(&queue, &["high", "default"]).await == 0
        },
    )
    .await;
    let drained_in = started.elapsed();
    let mut done_per_worker = Vec::new();
    for worker in &mut workers {
        stop(worker).await;
        let done = worker
            .events()
            .iter()
            .filter(|event| event.status == "DONE")
            .count();
        done_per_worker.push(done);
    }

    let runs = runs_by_uuid(&mut conn).await;
    let tally = Tally::of(&uuids, &runs);
    println!(
        "{WORKERS} workers: jobs {MANY_JOBS}, ran {}, runs {}, duplicates {}, lost {}, \
         done per worker {done_per_worker:?}, dispatched in {:.1} s, all run in {:.1} s",
        tally.ran,
        tally.runs,
        tally.duplicates.len(),
        tally.lost.len(),
        dispatched_in.as_secs_f64(),
        drained_in.as_secs_f64()
    );
    tally.assert_nothing_lost();
    assert!(
        tally.duplicates.is_empty(),
        "{} jobs ran more than once",
        tally.duplicates.len()
    );
    assert_eq!(runs.len(), MANY_JOBS);
    assert!(
        runs.values().all(|attempts| attempts == &[1]),
        "every job ran on its first attempt"
    );
    assert_eq!(done_per_worker.iter().sum::<usize>(), MANY_JOBS);
    assert!(
        done_per_worker.iter().all(|&done| done > 0),
        "every worker took a share: {done_per_worker:?}"
    );
    assert_eq!(failed_count(&mut conn).await, 0);
}

/// Dispatches accepted and refused by one or more producers that keep dispatching until told
/// to stop.
#[derive(Default)]
struct Produced {
    accepted: Mutex<Vec<String>>,
    refused: AtomicU64,
    slowest_refusal_ms: AtomicU64,
    /// Refused dispatches that started after Redis was back up.
    refused_while_up: AtomicU64,
    up_again: Mutex<Option<Instant>>,
    stop: AtomicBool,
}

impl Produced {
    fn accepted(&self) -> usize {
        self.accepted.lock().unwrap().len()
    }
}

/// Dispatches record jobs one after another until `produced.stop`, tolerating errors.
async fn produce(queue: RedisQueue, produced: Arc<Produced>) {
    while !produced.stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let dispatched = Record { due_ms: 0 }.dispatch().via(&queue).await;
        match dispatched {
            Ok(uuid) => produced.accepted.lock().unwrap().push(uuid.to_string()),
            Err(err) => {
                produced.refused.fetch_add(1, Ordering::Relaxed);
                if produced
                    .up_again
                    .lock()
                    .unwrap()
                    .is_some_and(|up| started >= up)
                {
                    eprintln!("a dispatch failed while Redis was up: {err}");
                    produced.refused_while_up.fetch_add(1, Ordering::Relaxed);
                }
                let ms = started.elapsed().as_millis() as u64;
                produced.slowest_refusal_ms.fetch_max(ms, Ordering::Relaxed);
                // A producer that meets an error tries again a little later.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

const PRODUCERS: usize = 2;
const DISPATCH_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_with_aof_loses_no_accepted_dispatch() {
    let started = Instant::now();
    let mut redis = TestRedis::start_with(&DURABLE);
    let queue = redis.queue();
    let mut workers: Vec<WorkerProcess> = (0..2)
        .map(|_| {
            start_worker(
                &redis,
                &[
                    "--concurrency",
                    "5",
                    "--retry-after",
                    "3",
                    "--timeout",
                    "2",
                    "--tries",
                    "0",
                    "--sleep",
                    "1",
                ],
            )
        })
        .collect();
    let produced = Arc::new(Produced::default());
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let queue = redis.queue_with(QueueConfig {
                command_timeout: DISPATCH_TIMEOUT,
                ..QueueConfig::default()
            });
            tokio::spawn(produce(queue, produced.clone()))
        })
        .collect();

    wait_until(LONG, "jobs are dispatched and running", || async {
        produced.accepted() >= 300 && records_len(&mut redis.conn().await).await >= 100
    })
    .await;
    redis.kill();
    let killed_at = Instant::now();
    let accepted_before = produced.accepted();
    wait_until(LONG, "dispatches fail while Redis is down", || async {
        produced.refused.load(Ordering::Relaxed) >= 10
    })
    .await;
    redis.restart();
    *produced.up_again.lock().unwrap() = Some(Instant::now());
    let downtime = killed_at.elapsed();
    let accepted_at_restart = produced.accepted();
    wait_until(LONG, "dispatches succeed again", || async {
        produced.accepted() >= accepted_at_restart + 300
    })
    .await;
    produced.stop.store(true, Ordering::Relaxed);
    for producer in producers {
        producer.await.expect("a producer ends");
    }
    let accepted = produced.accepted.lock().unwrap().clone();

    let mut conn = redis.conn().await;
    wait_until(LONG, "every accepted dispatch has run", || async {
        let runs = runs_by_uuid(&mut redis.conn().await).await;
        accepted.iter().all(|uuid| runs.contains_key(uuid))
    })
    .await;
    wait_settled(&queue, &["default"]).await;
    for worker in &mut workers {
        assert!(worker.is_running(), "a worker exited during the outage");
        assert_no_panic(worker);
    }
    for worker in &mut workers {
        stop(worker).await;
    }

    let runs = runs_by_uuid(&mut conn).await;
    let tally = Tally::of(&accepted, &runs);
    let refused = produced.refused.load(Ordering::Relaxed);
    let slowest_refusal = produced.slowest_refusal_ms.load(Ordering::Relaxed);
    let refused_while_up = produced.refused_while_up.load(Ordering::Relaxed);
    println!(
        "Redis SIGKILL + AOF restart: accepted dispatches {} ({accepted_before} before the kill, \
         {} after), refused {refused} (slowest refusal {slowest_refusal} ms, \
         {refused_while_up} after the restart), Redis down {} ms, \
         ran {}, duplicates {}, lost {}, {:.1} s",
        accepted.len(),
        accepted.len() - accepted_at_restart,
        downtime.as_millis(),
        tally.ran,
        tally.duplicates.len(),
        tally.lost.len(),
        started.elapsed().as_secs_f64()
    );
    tally.assert_nothing_lost();
    assert!(
        slowest_refusal < (DISPATCH_TIMEOUT + Duration::from_secs(2)).as_millis() as u64,
        "a dispatch while Redis was down took {slowest_refusal} ms to fail"
    );
    assert_eq!(failed_count(&mut conn).await, 0);
}

/// Longer than a handle's own reconnection attempts after a failed call (about 0.7 s).
const OUTAGE: Duration = Duration::from_millis(1_500);

#[tokio::test]
async fn a_handle_works_at_once_when_redis_is_back_after_an_outage() {
    let mut redis = TestRedis::start();
    let queue = redis.queue_with(QueueConfig {
        command_timeout: DISPATCH_TIMEOUT,
        ..QueueConfig::default()
    });
    queue.size("default").await.expect("Redis answers");
    redis.kill();
    let refused = wait_for(LONG, "the handle finds the connection refused", || async {
        let started = Instant::now();
        match queue.size("default").await {
            Err(Error::Unreachable(err)) if err.is_connection_refusal() => Some(started.elapsed()),
            _ => None,
        }
    })
    .await;
    assert!(
        refused <= DISPATCH_TIMEOUT + Duration::from_millis(500),
        "a refusal took {refused:?}"
    );
    let started = Instant::now();
    let dispatched = Record { due_ms: 0 }.dispatch().via(&queue).await;
    let refused_dispatch = started.elapsed();
    assert!(
        matches!(dispatched, Err(Error::Unreachable(_) | Error::Timeout(_))),
        "a dispatch while Redis is down fails: {dispatched:?}"
    );
    assert!(refused_dispatch <= DISPATCH_TIMEOUT + Duration::from_millis(500));
    // The outage outlasts the reconnection attempts the failures started.
    tokio::time::sleep(OUTAGE).await;
    redis.restart();

    let started = Instant::now();
    let size = queue.size("default").await;
    let dispatched = Record { due_ms: 0 }.dispatch().via(&queue).await;
    println!(
        "handle after an outage of {} ms: refusal in {} ms, dispatch refused in {} ms; \
         once back: first call {size:?}, first dispatch {dispatched:?}, {} ms",
        OUTAGE.as_millis(),
        refused.as_millis(),
        refused_dispatch.as_millis(),
        started.elapsed().as_millis()
    );
    size.expect("the first call after Redis came back succeeds");
    dispatched.expect("the first dispatch after Redis came back succeeds");
    assert_eq!(queue.size("default").await.unwrap().ready, 1);
}

/// A kind of Redis trouble a worker must live through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trouble {
    /// `CLIENT KILL TYPE normal` cuts every client connection of a busy worker; `CLIENT KILL
    /// ID` the blocking connection of an idle one.
    KilledConnections,
    /// `CLIENT PAUSE 2000 ALL`: no command is served for 2 s.
    ClientPause,
    /// `DEBUG SLEEP 2`: the server is blocked for 2 s.
    DebugSleep,
    /// The server is killed with SIGKILL and started again (with AOF) on the same port.
    Restart,
    /// A restart after an outage longer than `--retry-after` and than the worker's longest
    /// pause between fetches.
    LongOutage,
}

impl Trouble {
    /// The worker's `--retry-after`: longer than the trouble, except for a long outage.
    fn retry_after(self) -> &'static str {
        match self {
            Trouble::LongOutage => "3",
            _ => "8",
        }
    }

    /// The worker's `--timeout`: below `--retry-after`, and far above the long jobs' run time
    /// where the long jobs must run exactly once.
    fn timeout(self) -> &'static str {
        match self {
            Trouble::LongOutage => "2",
            _ => "6",
        }
    }

    /// Whether the trouble is also caused while the worker is idle, waiting for a push.
    fn also_when_idle(self) -> bool {
        self != Trouble::LongOutage
    }
}

/// Jobs long enough to be running while the trouble happens.
const LONG_JOB_MS: u64 = 1_500;
const TROUBLE_CONCURRENCY: usize = 4;
/// The trouble workers' `--sleep`: an idle worker wakes for a push at once, through its
/// blocking wait, and checks its queues at least this often without one.
const IDLE_SLEEP: Duration = Duration::from_secs(10);
/// The worker's longest pause between two fetches that failed.
const FETCH_PAUSE_CAP: Duration = Duration::from_secs(1);
/// How long a long outage lasts at least: past the long outage's `--retry-after` (3 s).
const LONG_OUTAGE: Duration = Duration::from_secs(6);

/// What one bout of trouble did to the worker.
struct Bout {
    phase: &'static str,
    trouble: Duration,
    resumed: Duration,
    warnings: Vec<String>,
}

/// Runs one worker through `trouble` while it runs jobs (with a backlog waiting) and, for most
/// kinds, again while it is idle, and checks that it carries on: no panic, no exit, every job
/// runs, and jobs dispatched afterwards run within a bounded time.
async fn a_worker_lives_through(trouble: Trouble) {
    let started = Instant::now();
    let mut redis =
        TestRedis::start_with(&[&DURABLE[..], &["--enable-debug-command", "yes"]].concat());
    let queue = redis.queue();
    let concurrency = TROUBLE_CONCURRENCY.to_string();
    let mut worker = start_worker(
        &redis,
        &[
            "--concurrency",
            &concurrency,
            "--retry-after",
            trouble.retry_after(),
            "--timeout",
            trouble.timeout(),
            "--tries",
            "0",
            // Long enough that a worker woken only by this fallback would fail the bounds.
            "--sleep",
            &IDLE_SLEEP.as_secs().to_string(),
        ],
    );
    worker.wait_started().await;
    let mut records = dispatch_records(&queue, "default", 20).await;
    // The first jobs ran.
    wait_for_runs(&redis.conn().await, 20, LONG).await;
    let mut bouts = Vec::new();

    // Busy: long jobs on every slot, a backlog behind them.
    let mut long_jobs = Vec::new();
    for _ in 0..TROUBLE_CONCURRENCY {
        let uuid = Sleep { ms: LONG_JOB_MS }.dispatch().sent_via(&queue).await;
        long_jobs.push(uuid.to_string());
    }
    for uuid in &long_jobs {
        worker
            .wait_for_event(LONG, "a long job is running", |e| {
                &e.uuid == uuid && e.status == "RUNNING"
            })
            .await;
    }
    records.extend(dispatch_records(&queue, "default", 100).await);
    let lines_before = worker.lines().len();
    let lasted = inflict(trouble, &mut redis, &worker, &long_jobs).await;
    bouts.push(Bout {
        phase: "busy",
        trouble: lasted,
        resumed: resumes_within(&redis, &queue, &mut records).await,
        warnings: warnings_since(&worker, lines_before),
    });

    // Idle: nothing to do, the worker waiting for a push.
    if trouble.also_when_idle() {
        wait_settled(&queue, &["default"]).await;
        let lines_before = worker.lines().len();
        let lasted = inflict(trouble, &mut redis, &worker, &[]).await;
        bouts.push(Bout {
            phase: "idle",
            trouble: lasted,
            resumed: resumes_within(&redis, &queue, &mut records).await,
            warnings: warnings_since(&worker, lines_before),
        });
    }

    wait_settled(&queue, &["default"]).await;
    let mut conn = redis.conn().await;
    let runs = runs_by_uuid(&mut conn).await;
    let tally = Tally::of(&records, &runs);
    let events = worker.events();
    let long_runs: Vec<usize> = long_jobs
        .iter()
        .map(|uuid| {
            events
                .iter()
                .filter(|e| &e.uuid == uuid && e.status == "DONE")
                .count()
        })
        .collect();
    assert!(worker.is_running(), "the worker exited");
    assert_no_panic(&worker);
    let failed = failed_count(&mut conn).await;
    stop(&mut worker).await;

    for bout in &bouts {
        for warning in &bout.warnings {
            eprintln!("{trouble:?}, {}: the worker logged {warning}", bout.phase);
        }
    }
    let bout_figures: Vec<String> = bouts
        .iter()
        .map(|bout| {
            format!(
                "{}: trouble {} ms, warnings {}, new jobs ran {} ms after",
                bout.phase,
                bout.trouble.as_millis(),
                bout.warnings.len(),
                bout.resumed.as_millis()
            )
        })
        .collect();
    println!(
        "{trouble:?}: record jobs {}, ran {}, duplicates {}, lost {}; long jobs' runs {long_runs:?}; \
         {}; failed {failed}; {:.1} s",
        records.len(),
        tally.ran,
        tally.duplicates.len(),
        tally.lost.len(),
        bout_figures.join("; "),
        started.elapsed().as_secs_f64()
    );
    tally.assert_nothing_lost();
    assert_eq!(failed, 0, "no job failed");
    for bout in &bouts {
        // Idle, the new jobs wake the worker through its blocking wait, which therefore came
        // back; busy, they wait for the backlog and the long jobs too.
        let bound = match bout.phase {
            "idle" => Duration::from_secs(5),
            _ => Duration::from_secs(12),
        };
        assert!(
            bout.resumed <= bound,
            "{}: new jobs ran {:?} after the {trouble:?}",
            bout.phase,
            bout.resumed
        );
    }
    match trouble {
        Trouble::ClientPause | Trouble::DebugSleep => {
            // A stall shorter than every timeout is only a delay: each job runs once.
            assert!(tally.duplicates.is_empty(), "{:?}", tally.duplicates);
        }
        Trouble::KilledConnections | Trouble::Restart | Trouble::LongOutage => {
            for bout in &bouts {
                assert!(
                    !bout.warnings.is_empty(),
                    "the worker logged the {} {trouble:?}",
                    bout.phase
                );
            }
        }
    }
    if trouble == Trouble::LongOutage {
        // The reservations of the long jobs expired during the outage: a job may run again,
        // but the acknowledgements were never given up, and fetching resumed within one
        // capped pause of Redis coming back.
        assert!(
            long_runs.iter().all(|&n| n >= 1),
            "every long job finished: {long_runs:?}"
        );
        let warnings = &bouts[0].warnings;
        assert!(
            !warnings.iter().any(|w| w.contains("giving up")),
            "the worker gave up on Redis: {warnings:?}"
        );
        let pauses = fetch_pauses(warnings);
        assert!(
            pauses.iter().all(|&pause| pause <= FETCH_PAUSE_CAP),
            "fetch pauses beyond the cap: {pauses:?}"
        );
        assert!(
            bouts[0].resumed <= FETCH_PAUSE_CAP + Duration::from_secs(5),
            "new jobs ran {:?} after Redis came back",
            bouts[0].resumed
        );
    } else {
        // Redis was back before any reservation expired: the results of the long jobs,
        // finished during the trouble, were delivered, and none ran twice.
        assert!(long_runs.iter().all(|&n| n == 1), "{long_runs:?}");
    }
}

/// The pauses a worker announced in its `cannot fetch jobs; retrying in ...` warnings.
fn fetch_pauses(warnings: &[String]) -> Vec<Duration> {
    warnings
        .iter()
        .filter_map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).ok()?;
            let pause = line["message"]
                .as_str()?
                .strip_prefix("cannot fetch jobs; retrying in ")?;
            let seconds = match pause.strip_suffix("ms") {
                Some(ms) => ms.parse::<f64>().ok()? / 1000.0,
                None => pause.strip_suffix('s')?.parse::<f64>().ok()?,
            };
            Some(Duration::from_secs_f64(seconds))
        })
        .collect()
}

/// Causes `trouble` and returns how long it lasted. `running` jobs, when given, finish while
/// Redis is down in a restart, so their results wait for Redis to come back.
async fn inflict(
    trouble: Trouble,
    redis: &mut TestRedis,
    worker: &WorkerProcess,
    running: &[String],
) -> Duration {
    let started = Instant::now();
    match trouble {
        Trouble::KilledConnections if running.is_empty() => {
            // The idle worker's blocking wait, cut by its id.
            let mut conn = redis.conn().await;
            let id = wait_for(LONG, "the worker's BLPOP is blocked", || async {
                let clients: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .query_async(&mut redis.conn().await)
                    .await
                    .expect("CLIENT LIST answers");
                clients
                    .lines()
                    .find(|client| client.contains(" cmd=blpop ") && client.contains(" flags=b "))
                    .and_then(|client| client.strip_prefix("id="))
                    .and_then(|rest| rest.split(' ').next())
                    .map(str::to_owned)
            })
            .await;
            let killed: u64 = redis::cmd("CLIENT")
                .arg(&["KILL", "ID", &id])
                .query_async(&mut conn)
                .await
                .expect("CLIENT KILL ID answers");
            assert_eq!(
                killed, 1,
                "CLIENT KILL ID cut the worker's BLPOP connection"
            );
        }
        Trouble::KilledConnections => {
            let killed: u64 = redis::cmd("CLIENT")
                .arg(&["KILL", "TYPE", "normal"])
                .query_async(&mut redis.conn().await)
                .await
                .expect("CLIENT KILL answers");
            assert!(killed >= 1, "CLIENT KILL cut the worker's connections");
        }
        Trouble::ClientPause => {
            let mut conn = redis.conn().await;
            redis::cmd("CLIENT")
                .arg(&["PAUSE", "2000", "ALL"])
                .query_async::<()>(&mut conn)
                .await
                .expect("CLIENT PAUSE answers");
            // Served only once the pause is over.
            redis::cmd("PING")
                .query_async::<()>(&mut conn)
                .await
                .expect("PING answers after the pause");
        }
        Trouble::DebugSleep => {
            redis::cmd("DEBUG")
                .arg(&["SLEEP", "2"])
                .query_async::<()>(&mut redis.conn().await)
                .await
                .expect("DEBUG SLEEP answers");
        }
        Trouble::Restart | Trouble::LongOutage => {
            let lines_before = worker.lines().len();
            redis.kill();
            if running.is_empty() {
                // The worker notices that its connections are gone.
                wait_until(LONG, "the worker logged the outage", || async {
                    !warnings_since(worker, lines_before).is_empty()
                })
                .await;
            } else {
                for uuid in running {
                    worker
                        .wait_for_event(LONG, "a running job finished during the outage", |e| {
                            &e.uuid == uuid && e.status == "DONE"
                        })
                        .await;
                }
            }
            if trouble == Trouble::LongOutage {
                let cap = format!("retrying in {FETCH_PAUSE_CAP:?}");
                wait_until(LONG, "the worker's fetch pause reached its cap", || async {
                    warnings_since(worker, lines_before)
                        .iter()
                        .any(|w| w.contains(&cap))
                })
                .await;
                // The outage itself, past the reservations' end: not a wait for a condition.
                tokio::time::sleep(LONG_OUTAGE.saturating_sub(started.elapsed())).await;
            }
            redis.restart();
        }
    }
    started.elapsed()
}

/// Dispatches new jobs after trouble and waits until they, and everything dispatched before,
/// have run; returns how long that took.
async fn resumes_within(
    redis: &TestRedis,
    queue: &RedisQueue,
    records: &mut Vec<String>,
) -> Duration {
    let started = Instant::now();
    let fresh = dispatch_records_retrying(queue, 10).await;
    records.extend(fresh);
    wait_until(
        Duration::from_secs(30),
        "jobs dispatched after the trouble ran",
        || async {
            let runs = runs_by_uuid(&mut redis.conn().await).await;
            records.iter().all(|uuid| runs.contains_key(uuid))
        },
    )
    .await;
    started.elapsed()
}

#[tokio::test]
async fn a_worker_lives_through_killed_connections() {
    a_worker_lives_through(Trouble::KilledConnections).await;
}

#[tokio::test]
async fn a_worker_lives_through_client_pause() {
    a_worker_lives_through(Trouble::ClientPause).await;
}

#[tokio::test]
async fn a_worker_lives_through_debug_sleep() {
    a_worker_lives_through(Trouble::DebugSleep).await;
}

#[tokio::test]
async fn a_worker_lives_through_a_redis_restart() {
    a_worker_lives_through(Trouble::Restart).await;
}

#[tokio::test]
async fn a_worker_lives_through_a_long_redis_outage() {
    a_worker_lives_through(Trouble::LongOutage).await;
}

/// One handler run of a [`Guarded`] job: from its start to its end, or to the kill of its
/// worker when it never ended.
#[derive(Debug, Clone)]
struct Interval {
    n: u64,
    start: u64,
    end: u64,
}

/// The runs of `Guarded` jobs, from the starts and ends they recorded; a run without an end
/// ends at the first kill after its start.
async fn guarded_intervals(conn: &mut MultiplexedConnection, kills: &[u64]) -> Vec<Interval> {
    let read = |entries: Vec<String>| -> Vec<serde_json::Value> {
        entries
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect()
    };
    let starts = read(conn.lrange(examples::GUARDED_KEY, 0, -1).await.unwrap());
    let ends = read(
        conn.lrange(examples::GUARDED_FINISHED_KEY, 0, -1)
            .await
            .unwrap(),
    );
    let key = |e: &serde_json::Value| (e["uuid"].to_string(), e["attempt"].as_u64().unwrap());
    let ended: HashMap<_, u64> = ends
        .iter()
        .map(|e| (key(e), e["finished_ms"].as_u64().unwrap()))
        .collect();
    starts
        .iter()
        .map(|s| {
            let start = s["started_ms"].as_u64().unwrap();
            let end = ended.get(&key(s)).copied().unwrap_or_else(|| {
                *kills
                    .iter()
                    .find(|k| **k >= start)
                    .expect("a run without an end was killed")
            });
            Interval {
                n: s["n"].as_u64().unwrap(),
                start,
                end,
            }
        })
        .collect()
}

/// The most of `intervals` running at any one instant.
fn most_at_once(intervals: &[&Interval]) -> usize {
    intervals
        .iter()
        .map(|i| {
            intervals
                .iter()
                .filter(|o| o.start <= i.start && i.start < o.end)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn workers_killed_while_holding_slots_and_locks_leave_nothing_stuck_or_doubled() {
    use examples::{Guarded, RefreshCache};
    const KILLS: usize = 3;
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    // Jobs 0-29 share a funnel of 2 slots; 100-114 an overlap lock; 200-209 are unique until
    // processing (one shop each).
    let mut bulk = Bulk::via(&queue);
    for n in 0..30u64 {
        let job = Guarded {
            n,
            group: "funnel".into(),
            ms: 300,
            funnel: Some(2),
            ..Default::default()
        };
        bulk.add(job.dispatch().tries(10)).unwrap();
    }
    for n in 100..115u64 {
        let job = Guarded {
            n,
            group: "overlap".into(),
            ms: 300,
            overlap: Some("k".into()),
            ..Default::default()
        };
        bulk.add(job.dispatch().tries(10)).unwrap();
    }
    for shop in 200..210u64 {
        bulk.add(RefreshCache { shop, ms: 300 }.dispatch().tries(10))
            .unwrap();
    }
    bulk.send().await.unwrap();
    let args = ["--retry-after", "2", "--concurrency", "4", "--sleep", "1"];
    let mut workers: Vec<WorkerProcess> = (0..3).map(|_| start_worker(&redis, &args)).collect();
    let mut kills = Vec::new();
    // Each kill takes down the next worker, holding whatever its jobs hold at that moment.
    for (kill, worker) in workers.iter_mut().enumerate().take(KILLS) {
        let threshold = 8 * (kill + 1);
        wait_until(LONG, format!("{threshold} guarded runs"), || async {
            conn.clone()
                .llen::<_, usize>(examples::GUARDED_KEY)
                .await
                .unwrap()
                >= threshold
        })
        .await;
        worker.kill();
        kills.push(examples::now_ms());
        *worker = start_worker(&redis, &args);
    }
    wait_until(LONG, "every guarded job finished", || {
        let mut conn = conn.clone();
        async move {
            let ends: Vec<String> = conn
                .lrange(examples::GUARDED_FINISHED_KEY, 0, -1)
                .await
                .unwrap();
            let done: HashSet<u64> = ends
                .iter()
                .map(|e| {
                    serde_json::from_str::<serde_json::Value>(e).unwrap()["n"]
                        .as_u64()
                        .unwrap()
                })
                .collect();
            done.len() == 45
        }
    })
    .await;
    wait_settled(&queue, &["default"]).await;
    let last_kill = *kills.last().unwrap();
    let settled_after_kill = examples::now_ms() - last_kill;
    for worker in &mut workers {
        stop(worker).await;
    }

    let intervals = guarded_intervals(&mut conn, &kills).await;
    let funnel: Vec<&Interval> = intervals.iter().filter(|i| i.n < 100).collect();
    let overlap: Vec<&Interval> = intervals
        .iter()
        .filter(|i| (100..200).contains(&i.n))
        .collect();
    let killed_runs = intervals.iter().filter(|i| kills.contains(&i.end)).count();
    println!(
        "kill -9 x{KILLS} while holding: {} runs ({killed_runs} cut by a kill), funnel of 2 at most {} at once, \
         overlap lock at most {} at once, settled {settled_after_kill} ms after the last kill",
        intervals.len(),
        most_at_once(&funnel),
        most_at_once(&overlap),
    );
    assert!(most_at_once(&funnel) <= 2, "{funnel:?}");
    assert!(most_at_once(&overlap) <= 1, "{overlap:?}");
    let held: Vec<String> = conn.keys("jobs:*").await.unwrap();
    let held: Vec<&String> = held
        .iter()
        .filter(|k| k.contains("funnel") || k.contains("overlap") || k.contains("unique"))
        .collect();
    assert!(
        held.is_empty(),
        "holds left after every job settled: {held:?}"
    );
    let refreshed: u64 = conn.llen(examples::UNIQUE_KEY).await.unwrap();
    assert!(refreshed >= 10, "every unique job ran");
}
