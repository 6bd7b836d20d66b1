//! A rolling deploy under load: three worker processes, replaced one at a time by SIGTERM (a
//! `--grace` shorter than the long jobs) for a minute, the first round replacing the old
//! release's workers (`test_worker_old`, which does not link `new_kind`) with the new one's
//! (`test_worker`), while producers dispatch short jobs, some failing once, long resumable jobs
//! and jobs of the type only the new release links. It costs nothing: no job fails or is lost,
//! a short job's attempts are its handler's failures plus one, and a long job repeats at most
//! one step per interruption.

use examples::{Flaky, Noop, Resumable, RESUMABLE_KEY};
use redis::AsyncCommands;
use redjob::{job, Job, JobContext, JobResult, RedisQueue};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tests::worker_process::{JobEvent, WorkerProcess};
use tests::{wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(120);
/// How long workers are replaced for.
const DEPLOYING: Duration = Duration::from_secs(60);
/// How often one worker is replaced.
const EVERY: Duration = Duration::from_secs(4);
const WORKER_ARGS: [&str; 8] = [
    "--grace",
    "1",
    "--tries",
    "3",
    "--backoff",
    "0",
    "--concurrency",
    "10",
];

/// The job type the new release adds: the test dispatches it, `test_worker` runs it.
#[derive(Serialize, Deserialize)]
struct NewKind {}

#[job(name = "new_kind")]
impl Job for NewKind {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

/// What the producers dispatched, by uuid: a short job with how many attempts it fails first.
#[derive(Default)]
struct Dispatched {
    short: HashMap<String, u64>,
    long: Vec<String>,
    new_kind: Vec<String>,
}

async fn produce(queue: RedisQueue, until: Instant) -> Dispatched {
    let mut dispatched = Dispatched::default();
    let mut tick = 0u64;
    while Instant::now() < until {
        let short = match tick % 4 {
            0 => Flaky { fail_times: 1 }.dispatch().sent_via(&queue).await,
            _ => Noop {}.dispatch().sent_via(&queue).await,
        };
        dispatched
            .short
            .insert(short.to_string(), u64::from(tick % 4 == 0));
        if tick % 10 == 0 {
            let new = NewKind {}.dispatch().sent_via(&queue).await;
            dispatched.new_kind.push(new.to_string());
        }
        if tick % 40 == 0 {
            let long = Resumable { steps: 30, ms: 200 }
                .dispatch()
                .sent_via(&queue)
                .await;
            dispatched.long.push(long.to_string());
        }
        tick += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dispatched
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_under_load_fails_loses_and_repeats_nothing() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let old =
        |url: &str| WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker_old"), url, &WORKER_ARGS);
    let new =
        |url: &str| WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), url, &WORKER_ARGS);
    let mut running: Vec<WorkerProcess> = (0..3).map(|_| old(redis.url())).collect();
    let mut stopped: Vec<WorkerProcess> = Vec::new();
    let until = Instant::now() + DEPLOYING;
    let producer = tokio::spawn(produce(queue.clone(), until));
    let mut next = 0;
    while Instant::now() < until {
        tokio::time::sleep(EVERY).await;
        let mut leaving = std::mem::replace(&mut running[next], new(redis.url()));
        leaving.signal("TERM");
        assert_eq!(
            leaving.wait_exit(LONG).await.code(),
            Some(0),
            "a stopped worker exits 0"
        );
        stopped.push(leaving);
        next = (next + 1) % running.len();
    }
    let dispatched = producer.await.unwrap();
    wait_until(LONG, "every job is done", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;

    let failed = queue.failed_jobs(100).await.unwrap();
    assert!(failed.is_empty(), "no job failed: {failed:#?}");
    // Every process's log, the stopped ones' included: a job's DONE is in one of them.
    wait_until(LONG, "every job's DONE is logged", || async {
        let done = done_attempts(&stopped, &running);
        dispatched
            .short
            .keys()
            .chain(&dispatched.long)
            .chain(&dispatched.new_kind)
            .all(|uuid| done.contains_key(uuid))
    })
    .await;
    let done = done_attempts(&stopped, &running);
    for (uuid, failures) in &dispatched.short {
        assert_eq!(
            done[uuid],
            failures + 1,
            "a short job's attempts are its failures plus one: {uuid}"
        );
    }
    for uuid in dispatched.long.iter().chain(&dispatched.new_kind) {
        assert_eq!(done[uuid], 1, "no attempt was spent on the deploy: {uuid}");
    }
    let interrupted = interruptions(&stopped, &running);
    let mut conn = redis.conn().await;
    let entries: Vec<String> = conn.lrange(RESUMABLE_KEY, 0, -1).await.unwrap();
    for uuid in &dispatched.long {
        let mut runs: HashMap<u64, u32> = HashMap::new();
        for entry in &entries {
            let entry: serde_json::Value = serde_json::from_str(entry).unwrap();
            if entry["uuid"] == uuid.as_str() {
                *runs.entry(entry["step"].as_u64().unwrap()).or_default() += 1;
            }
        }
        assert_eq!(runs.len(), 30, "every step of {uuid} ran: {runs:?}");
        let repeated: u32 = runs.values().map(|n| n - 1).sum();
        let stops = interrupted.get(uuid).copied().unwrap_or(0);
        assert!(
            repeated <= stops,
            "{uuid} repeated {repeated} steps over {stops} interruptions"
        );
    }
    let deploys = stopped.len();
    let interruptions: u32 = interrupted.values().sum();
    println!(
        "rolling deploy: {deploys} workers replaced, {} short, {} long and {} new-kind jobs, \
         {interruptions} interruptions, 0 failed, 0 lost",
        dispatched.short.len(),
        dispatched.long.len(),
        dispatched.new_kind.len(),
    );
}

fn events<'a>(
    stopped: &'a [WorkerProcess],
    running: &'a [WorkerProcess],
) -> impl Iterator<Item = JobEvent> + 'a {
    stopped
        .iter()
        .chain(running)
        .flat_map(|worker| worker.events())
}

/// The attempt each job was done on.
fn done_attempts(stopped: &[WorkerProcess], running: &[WorkerProcess]) -> HashMap<String, u64> {
    events(stopped, running)
        .filter(|e| e.status == "DONE")
        .map(|e| (e.uuid, e.attempt))
        .collect()
}

/// How often each job was interrupted by a stopping worker.
fn interruptions(stopped: &[WorkerProcess], running: &[WorkerProcess]) -> HashMap<String, u32> {
    let mut counts = HashMap::new();
    for event in events(stopped, running).filter(|e| e.status == "INTERRUPTED") {
        *counts.entry(event.uuid).or_default() += 1;
    }
    counts
}
