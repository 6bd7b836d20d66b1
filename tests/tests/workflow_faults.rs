//! Workflows under kill -9: workers killed three times during a 2,000-job batch and during a
//! 200-link chain. Every callback runs exactly once, the batch's counts equal what ran, no link
//! is skipped, and a job runs twice only if it was in flight at a kill.

use examples::{Caught, Step};
use redis::AsyncCommands;
use redjob::workflow::{Batch, BatchStatus, Chain};
use redjob::Payload;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tests::worker_process::WorkerProcess;
use tests::{wait_for, wait_until, TestRedis};

const LONG: Duration = Duration::from_secs(90);
const KILLS: usize = 3;

/// A short retry_after brings a killed worker's jobs back quickly; tries allow a job to be in
/// flight at every kill and still run.
const ARGS: [&str; 8] = [
    "--retry-after",
    "3",
    "--timeout",
    "2",
    "--tries",
    "10",
    "--concurrency",
    "10",
];

fn start_worker(redis: &TestRedis) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis.url(), &ARGS)
}

/// Every step recorded: its label, uuid, start and end.
async fn steps(redis: &TestRedis) -> Vec<serde_json::Value> {
    tests::steps::recorded(&mut redis.conn().await).await
}

fn label(step: &serde_json::Value) -> &str {
    step["label"].as_str().unwrap()
}

/// The uuids of the jobs reserved on `default`: with its worker dead, the jobs in flight.
async fn in_flight(redis: &TestRedis) -> HashSet<String> {
    let members: Vec<String> = redis
        .conn()
        .await
        .zrange("queues:default:reserved", 0, -1)
        .await
        .unwrap();
    members
        .iter()
        .map(|m| Payload::from_json(m).unwrap().uuid.to_string())
        .collect()
}

/// Kills the worker three times, at a quarter, half and three quarters of `runs` recorded
/// steps, starting a new one each time; returns the jobs in flight at each kill and the last
/// worker.
async fn kill_three_times(redis: &TestRedis, runs: usize) -> (Vec<HashSet<String>>, WorkerProcess) {
    let mut worker = start_worker(redis);
    let mut at_kills = Vec::new();
    for kill in 1..=KILLS {
        let threshold = kill * runs / (KILLS + 1);
        wait_until(LONG, format!("{threshold} steps recorded"), || async {
            steps(redis).await.len() >= threshold
        })
        .await;
        worker.kill();
        let flying = in_flight(redis).await;
        let recorded = steps(redis).await.len();
        println!(
            "kill {kill}: after {recorded} of {runs} steps, {} in flight",
            flying.len()
        );
        assert!(
            recorded < runs,
            "kill {kill} came after the load had finished"
        );
        at_kills.push(flying);
        worker = start_worker(redis);
    }
    (at_kills, worker)
}

/// Asserts that a job that ran more than once was in flight at as many kills.
fn assert_reruns_only_in_flight(
    steps: &[serde_json::Value],
    at_kills: &[HashSet<String>],
) -> usize {
    let mut runs: HashMap<&str, usize> = HashMap::new();
    for step in steps {
        *runs.entry(step["uuid"].as_str().unwrap()).or_default() += 1;
    }
    let mut extra = 0;
    for (uuid, n) in runs {
        let kills = at_kills.iter().filter(|f| f.contains(uuid)).count();
        assert!(
            n - 1 <= kills,
            "job {uuid} ran {n} times but was in flight at {kills} kills"
        );
        extra += n - 1;
    }
    extra
}

#[tokio::test]
async fn a_batch_whose_workers_are_killed_three_times_counts_exactly_and_calls_back_once() {
    const JOBS: usize = 2_000;
    let started = Instant::now();
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = Batch::new()
        .jobs((0..JOBS).map(|n| {
            Step {
                label: format!("job{n}"),
                ms: 10,
                ..Step::default()
            }
            .dispatch()
        }))
        .then(
            Caught {
                label: "then".into(),
            }
            .dispatch(),
        )
        .catch(
            Caught {
                label: "catch".into(),
            }
            .dispatch(),
        )
        .finally(
            Caught {
                label: "finally".into(),
            }
            .dispatch(),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    let (at_kills, _worker) = kill_three_times(&redis, JOBS).await;
    let status = wait_for(LONG, "the batch finishes", || async {
        queue.batch(id).await.unwrap().filter(BatchStatus::finished)
    })
    .await;
    wait_until(LONG, "then and finally ran", || async {
        let steps = steps(&redis).await;
        ["caught:then", "caught:finally"]
            .iter()
            .all(|l| steps.iter().any(|s| label(s) == *l))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let steps = steps(&redis).await;
    let count = |wanted: &str| steps.iter().filter(|s| label(s) == wanted).count();
    assert_eq!(count("caught:then"), 1);
    assert_eq!(count("caught:finally"), 1);
    assert_eq!(count("caught:catch"), 0);
    let ran: HashSet<&str> = steps
        .iter()
        .map(label)
        .filter(|l| l.starts_with("job"))
        .collect();
    assert_eq!(ran.len(), JOBS, "every job ran");
    assert_eq!(
        (status.total, status.pending, status.failed),
        (JOBS as u64, 0, 0)
    );
    let jobs: Vec<serde_json::Value> = steps
        .iter()
        .filter(|s| label(s).starts_with("job"))
        .cloned()
        .collect();
    let extra = assert_reruns_only_in_flight(&jobs, &at_kills);
    println!(
        "batch of {JOBS}, kill -9 x{KILLS}: ran {} jobs, {extra} extra runs, in flight at the kills {}, \
         then 1, finally 1, catch 0, {:.1} s",
        ran.len(),
        at_kills.iter().map(HashSet::len).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn a_chain_whose_workers_are_killed_three_times_skips_no_link() {
    const LINKS: usize = 200;
    let started = Instant::now();
    let redis = TestRedis::start();
    let queue = redis.queue();
    let link = |n: usize| {
        Step {
            label: format!("link{n}"),
            ms: 20,
            ..Step::default()
        }
        .dispatch()
    };
    let mut chain = Chain::new(link(0));
    for n in 1..LINKS {
        chain = chain.then(link(n));
    }
    let id = chain
        .catch(
            Caught {
                label: "catch".into(),
            }
            .dispatch(),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    let (at_kills, _worker) = kill_three_times(&redis, LINKS).await;
    let last = format!("link{}", LINKS - 1);
    wait_until(LONG, "the last link ran", || async {
        steps(&redis).await.iter().any(|s| label(s) == last)
    })
    .await;
    wait_until(LONG, "the chain's keys are gone", || async {
        let mut conn = redis.conn().await;
        let keys: Vec<String> = conn.keys(format!("jobs:chain:{id}*")).await.unwrap();
        keys.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let steps = steps(&redis).await;
    assert!(
        steps.iter().all(|s| label(s) != "caught:catch"),
        "no link failed"
    );
    // Each link ran, and started after the last run of the one before it ended.
    let mut runs: Vec<Vec<&serde_json::Value>> = vec![Vec::new(); LINKS];
    for step in &steps {
        let n: usize = label(step).trim_start_matches("link").parse().unwrap();
        runs[n].push(step);
    }
    for n in 0..LINKS {
        assert!(!runs[n].is_empty(), "link {n} was skipped");
        if n > 0 {
            let before = runs[n - 1]
                .iter()
                .map(|s| s["ended_us"].as_u64().unwrap())
                .max()
                .unwrap();
            let start = runs[n]
                .iter()
                .map(|s| s["started_us"].as_u64().unwrap())
                .min()
                .unwrap();
            assert!(
                start >= before,
                "link {n} started before link {} ended",
                n - 1
            );
        }
    }
    let extra = assert_reruns_only_in_flight(&steps, &at_kills);
    println!(
        "chain of {LINKS}, kill -9 x{KILLS}: every link ran in order, {extra} extra runs, \
         in flight at the kills {}, {:.1} s",
        at_kills.iter().map(HashSet::len).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
}
