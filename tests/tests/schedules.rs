//! Schedules against a real redis-server and worker processes: workers started with
//! `--schedule` fire each tick exactly once between them, on time, and catch up the ticks missed
//! while none ran as the schedule's policy says.

use redis::AsyncCommands;
use std::collections::HashMap;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, TestRedis};

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis: &TestRedis, schedule: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        args,
        &[("TEST_SCHEDULE", schedule)],
    )
}

#[tokio::test]
async fn three_workers_fire_each_tick_of_a_per_second_schedule_once_and_on_time() {
    let redis = TestRedis::start();
    let args = ["--schedule", "--queue", "sched", "--concurrency", "4"];
    let mut workers: Vec<WorkerProcess> = (0..3)
        .map(|_| start_worker(&redis, "tick:1:last", &args))
        .collect();
    let mut conn = redis.conn().await;
    wait_until(LONG, "six ticks ran", || async {
        tests::steps::recorded(&mut redis.conn().await).await.len() >= 6
    })
    .await;
    for worker in &mut workers {
        worker.signal("TERM");
        assert!(worker.wait_exit(LONG).await.success());
    }
    let steps = tests::steps::recorded(&mut conn).await;
    let mut runs: HashMap<String, usize> = HashMap::new();
    for step in &steps {
        *runs
            .entry(step["uuid"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(runs.values().all(|n| *n == 1), "a tick ran twice: {runs:?}");
    // Each ran just after a whole second (its tick), by this host's clock, which Redis shares.
    for step in &steps {
        let late_ms = step["started_us"].as_u64().unwrap() / 1000 % 1000;
        assert!(late_ms < 500, "started {late_ms} ms after its tick");
    }
    let state: HashMap<String, String> = conn.hgetall("jobs:schedule:tick").await.unwrap();
    assert_eq!(state["last_outcome"], "pushed");
    assert!(state["last_tick"].parse::<i64>().unwrap() % 1000 == 0);
}

/// Starts a worker that keeps a minutely schedule whose last tick was ten minutes ago, on a
/// queue no worker serves, and returns how many jobs it pushed at start.
async fn caught_up(missed: &str) -> usize {
    let redis = TestRedis::start();
    let mut conn = redis.conn().await;
    let now_ms = tests::server_time(&mut conn).await as i64 * 1000;
    let minute = 60_000;
    let last = (now_ms / minute - 10) * minute;
    let _: () = conn
        .hset("jobs:schedule:minutely", "last_tick", last)
        .await
        .unwrap();
    let spec = format!("minutely:0 * * * * *:{missed}");
    let worker = start_worker(&redis, &spec, &["--schedule", "--queue", "other"]);
    worker.wait_started().await;
    wait_until(LONG, "the catch-up is recorded", || async {
        let last_now: i64 = redis
            .conn()
            .await
            .hget("jobs:schedule:minutely", "last_tick")
            .await
            .unwrap();
        last_now != last || missed == "skip"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready: usize = conn.llen("queues:sched").await.unwrap();
    ready
}

#[tokio::test]
async fn missed_ticks_are_caught_up_as_the_policy_says() {
    assert_eq!(caught_up("all-5").await, 5, "the latest five of ten");
    assert_eq!(caught_up("last").await, 1, "the latest one");
    assert_eq!(caught_up("skip").await, 0, "none");
}
