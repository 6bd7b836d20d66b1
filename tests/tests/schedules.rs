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
    // A cron expression with seconds, so the workers must agree on whole-second ticks however
    // far apart they start.
    let redis = TestRedis::start();
    let args = ["--schedule", "--queue", "sched", "--concurrency", "4"];
    let mut workers: Vec<WorkerProcess> = (0..3)
        .map(|_| start_worker(&redis, "tick:* * * * * *:last", &args))
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
/// queue no worker serves, and returns how many of the ten missed ticks' jobs it pushed.
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
    let _worker = start_worker(&redis, &spec, &["--schedule", "--queue", "other"]);
    // The worker records the schedules it keeps once its catch-up is done.
    wait_until(LONG, "the catch-up is done", || async {
        let seen: bool = redis
            .conn()
            .await
            .hexists("jobs:schedule:minutely", "seen_at")
            .await
            .unwrap();
        seen
    })
    .await;
    // Only the missed ticks' jobs count: the next minute's may fall in meanwhile.
    let missed_uuids: Vec<String> = (1..=10)
        .map(|k| {
            let tick = chrono::DateTime::from_timestamp_millis(last + k * minute).unwrap();
            redjob::schedule::tick_uuid("minutely", tick).to_string()
        })
        .collect();
    let waiting: Vec<String> = conn.lrange("queues:sched", 0, -1).await.unwrap();
    waiting
        .iter()
        .map(|p| redjob::Payload::from_json(p).unwrap().uuid.to_string())
        .filter(|uuid| missed_uuids.contains(uuid))
        .count()
}

#[tokio::test]
async fn missed_ticks_are_caught_up_as_the_policy_says() {
    assert_eq!(caught_up("all-5").await, 5, "the latest five of ten");
    assert_eq!(caught_up("last").await, 1, "the latest one");
    assert_eq!(caught_up("skip").await, 0, "none");
}

#[tokio::test]
async fn operators_list_schedules_run_one_now_and_see_stale_ones() {
    let redis = TestRedis::start();
    let jobsctl =
        tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    // A schedule no worker keeps any more: recorded long ago.
    let mut conn = redis.conn().await;
    let _: () = conn.zadd("jobs:schedules", "removed", 1_000).await.unwrap();
    let _: () = conn
        .hset("jobs:schedule:removed", "when", "every 1 min")
        .await
        .unwrap();
    let _worker = start_worker(
        &redis,
        "hourly:0 0 * * * *:last",
        &["--schedule", "--queue", "other"],
    );
    wait_until(LONG, "the worker records its schedule", || async {
        let listed = jobsctl.json(&["schedule"]);
        listed
            .as_array()
            .is_some_and(|l| l.iter().any(|s| s["name"] == "hourly"))
    })
    .await;
    let listed = jobsctl.json(&["schedule"]);
    let by_name = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let hourly = by_name("hourly");
    assert_eq!(hourly["stale"], false);
    assert_eq!(hourly["queue"], "sched");
    assert_eq!(hourly["when"], "0 0 * * * * (UTC)");
    assert!(
        hourly["next_tick"].as_str().unwrap().ends_with(":00:00Z"),
        "{hourly}"
    );
    assert_eq!(by_name("removed")["stale"], true);
    let table = jobsctl.run(&["schedule"]).stdout;
    assert!(
        table.contains("stale: no worker keeps it") && table.contains("hourly"),
        "{table}"
    );

    // Run it now: a worker that keeps it pushes its job at once.
    let ran = jobsctl.run(&["schedule", "run", "hourly"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    wait_until(LONG, "the job is pushed", || async {
        redis
            .conn()
            .await
            .llen::<_, usize>("queues:sched")
            .await
            .unwrap()
            == 1
    })
    .await;
    let refused = jobsctl.run(&["schedule", "run", "removed"]);
    assert_eq!(refused.code(), Some(1));
    assert!(
        refused.stderr.contains("no worker keeps schedule removed"),
        "{}",
        refused.stderr
    );
}

#[tokio::test]
async fn a_changed_expression_takes_effect_without_firing_a_tick_twice() {
    let redis = TestRedis::start();
    let args = ["--schedule", "--queue", "sched"];
    let mut first = start_worker(&redis, "tick:1:all-10", &args);
    wait_until(LONG, "two ticks ran", || async {
        tests::steps::recorded(&mut redis.conn().await).await.len() >= 2
    })
    .await;
    first.signal("TERM");
    assert!(first.wait_exit(LONG).await.success());
    // The same schedule every two seconds now; it catches up what it missed, once each.
    let _second = start_worker(&redis, "tick:2:all-10", &args);
    let before = tests::steps::recorded(&mut redis.conn().await).await.len();
    wait_until(LONG, "two more ticks ran", || async {
        tests::steps::recorded(&mut redis.conn().await).await.len() >= before + 2
    })
    .await;
    let steps = tests::steps::recorded(&mut redis.conn().await).await;
    tests::steps::assert_each_ran_once(&steps);
}

#[tokio::test]
async fn a_schedule_without_overlapping_skips_ticks_while_its_job_has_not_settled() {
    let redis = TestRedis::start();
    // Every second, but its job waits on a queue no worker serves: it never settles.
    let worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--schedule", "--queue", "other"],
        &[
            ("TEST_SCHEDULE", "guarded:1:last"),
            ("TEST_SCHEDULE_OVERLAP", "1"),
        ],
    );
    worker.wait_started().await;
    wait_until(LONG, "a tick is skipped", || async {
        let outcome: Option<String> = redis
            .conn()
            .await
            .hget("jobs:schedule:guarded", "last_outcome")
            .await
            .unwrap();
        outcome.as_deref() == Some("skipped")
    })
    .await;
    let queued: usize = redis.conn().await.llen("queues:sched").await.unwrap();
    assert_eq!(queued, 1, "one job, the others skipped");
    let lock: Option<String> = redis
        .conn()
        .await
        .get("jobs:unique:schedule:guarded")
        .await
        .unwrap();
    assert!(lock.is_some(), "the waiting job holds the overlap lock");
}

/// The ticks (Unix seconds) of the `tick` schedule whose jobs ran, found by their uuids, and
/// the jobs that ran more than once.
async fn ticks_run(redis: &TestRedis) -> (Vec<u64>, Vec<String>) {
    let steps = tests::steps::recorded(&mut redis.conn().await).await;
    let mut ran: HashMap<String, u64> = HashMap::new();
    let mut doubled = Vec::new();
    for step in &steps {
        let uuid = step["uuid"].as_str().unwrap().to_owned();
        let started = step["started_us"].as_u64().unwrap() / 1_000_000;
        // A job runs within seconds of its tick (a killed worker's comes back after
        // --retry-after): look its tick up among the seconds before it started.
        let tick = (started.saturating_sub(30)..=started).find(|second| {
            let at = chrono::DateTime::from_timestamp(*second as i64, 0).unwrap();
            redjob::schedule::tick_uuid("tick", at).to_string() == uuid
        });
        let tick = tick.unwrap_or_else(|| panic!("job {uuid} is no tick's"));
        if ran.insert(uuid.clone(), tick).is_some() {
            doubled.push(uuid);
        }
    }
    let mut ticks: Vec<u64> = ran.into_values().collect();
    ticks.sort();
    (ticks, doubled)
}

/// Asserts one job per second from the first tick to the last, none twice.
fn assert_every_second_once(seconds: &[u64], doubled: &[String]) {
    assert!(doubled.is_empty(), "ticks ran twice: {doubled:?}");
    let span = seconds.last().unwrap() - seconds.first().unwrap() + 1;
    assert_eq!(
        seconds.len() as u64,
        span,
        "one job per second: {seconds:?}"
    );
}

#[tokio::test]
async fn all_workers_stopped_for_ten_seconds_catch_up_every_tick_they_missed() {
    let redis = TestRedis::start();
    let args = ["--schedule", "--queue", "sched", "--concurrency", "4"];
    let spec = "tick:* * * * * *:all-100";
    let mut workers: Vec<WorkerProcess> =
        (0..2).map(|_| start_worker(&redis, spec, &args)).collect();
    wait_until(LONG, "three ticks ran", || async {
        ticks_run(&redis).await.0.len() >= 3
    })
    .await;
    for worker in &mut workers {
        worker.signal("TERM");
        assert!(worker.wait_exit(LONG).await.success());
    }
    let before = ticks_run(&redis).await.0.len();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let _workers: Vec<WorkerProcess> = (0..2).map(|_| start_worker(&redis, spec, &args)).collect();
    wait_until(LONG, "the missed ticks and two more ran", || async {
        ticks_run(&redis).await.0.len() >= before + 12
    })
    .await;
    let (seconds, doubled) = ticks_run(&redis).await;
    assert_every_second_once(&seconds, &doubled);
}

#[tokio::test]
async fn killing_the_worker_that_fired_a_tick_loses_and_doubles_no_tick() {
    let redis = TestRedis::start();
    // The workers take no job of the schedule's queue: every job pushed stays there, counted
    // once per push (a job run again after a kill is not a tick fired twice).
    let args = ["--schedule", "--queue", "other"];
    let spec = "tick:* * * * * *:last";
    let mut workers: Vec<WorkerProcess> =
        (0..3).map(|_| start_worker(&redis, spec, &args)).collect();
    for round in 0..3 {
        // The worker that fires the next tick: the first whose log gains a SCHEDULED line.
        let counts: Vec<usize> = workers.iter().map(scheduled_lines).collect();
        let firer = tests::wait_for(LONG, format!("round {round}: a tick is fired"), || {
            let firer = workers
                .iter()
                .zip(&counts)
                .position(|(worker, before)| scheduled_lines(worker) > *before);
            async move { firer }
        })
        .await;
        workers[firer].kill();
        workers[firer] = start_worker(&redis, spec, &args);
    }
    let pushed = || async { pushed_ticks(&redis).await.0.len() };
    let fired = pushed().await;
    wait_until(LONG, "three more ticks fired", || async {
        pushed().await >= fired + 3
    })
    .await;
    let (ticks, doubled) = pushed_ticks(&redis).await;
    assert_every_second_once(&ticks, &doubled);
}

/// The ticks (Unix seconds) of the `tick` schedule whose jobs wait in `queues:sched`, found by
/// their uuids, and the uuids pushed more than once.
async fn pushed_ticks(redis: &TestRedis) -> (Vec<u64>, Vec<String>) {
    let waiting: Vec<String> = redis
        .conn()
        .await
        .lrange("queues:sched", 0, -1)
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp() as u64;
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut doubled = Vec::new();
    for payload in &waiting {
        let uuid = redjob::Payload::from_json(payload)
            .unwrap()
            .uuid
            .to_string();
        let tick = (now.saturating_sub(120)..=now + 1).find(|second| {
            let at = chrono::DateTime::from_timestamp(*second as i64, 0).unwrap();
            redjob::schedule::tick_uuid("tick", at).to_string() == uuid
        });
        let tick = tick.unwrap_or_else(|| panic!("job {uuid} is no tick's"));
        if seen.insert(uuid.clone(), tick).is_some() {
            doubled.push(uuid);
        }
    }
    let mut ticks: Vec<u64> = seen.into_values().collect();
    ticks.sort();
    (ticks, doubled)
}

fn scheduled_lines(worker: &WorkerProcess) -> usize {
    worker
        .lines()
        .iter()
        .filter(|line| line.contains("\"SCHEDULED\""))
        .count()
}

#[tokio::test]
async fn a_schedule_only_process_fires_the_ticks_that_other_workers_run() {
    let redis = TestRedis::start();
    let mut scheduler = start_worker(&redis, "tick:* * * * * *:last", &["--schedule-only"]);
    let _worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "sched"],
    );
    wait_until(LONG, "two ticks ran", || async {
        tests::steps::recorded(&mut redis.conn().await).await.len() >= 2
    })
    .await;
    assert!(
        !scheduler
            .lines()
            .iter()
            .any(|line| line.contains("\"RUNNING\"")),
        "the schedule-only process ran no job"
    );
    scheduler.signal("TERM");
    assert!(scheduler.wait_exit(LONG).await.success());
}
