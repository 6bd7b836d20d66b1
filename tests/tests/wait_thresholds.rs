//! Wait thresholds (Horizon's `waits`) on one redis-server and on a Redis Cluster (each test
//! runs on both): set by `jobsctl waits` and
//! by a worker's `--wait`, checked by `jobsctl monitor` (exit status 1), flagged by the
//! dashboard's queue endpoint and exported by the worker's Prometheus endpoint. A job is made
//! to have waited by setting back its `createdAt`, or the due time of a delayed one, instead of
//! waiting.

use examples::Noop;
use redis::AsyncCommands;
use redjob::admin::Admin;
use redjob::RedisQueue;
use std::collections::HashMap;
use std::time::Duration;
use tests::dashboard::Dashboard;
use tests::jobs_command::JobsCommand;
use tests::scenarios::old_ready_job;
use tests::worker_process::WorkerProcess;
use tests::{free_port, http, on_both_layouts, wait_for, wait_until, SentVia, Server};

const LONG: Duration = Duration::from_secs(30);
const TEST_WORKER: &str = env!("CARGO_BIN_EXE_test_worker");

fn jobs(redis: &Server) -> JobsCommand {
    JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url())
}

/// The rows of `jobsctl --json monitor args...` (which exits 0 or 1), with its exit code and
/// stderr.
fn monitor(jobs: &JobsCommand, args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let ran = jobs.run(&[&["--json", "monitor"], args].concat());
    let rows = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|err| panic!("monitor printed no JSON ({err}): {}", ran.stdout));
    (ran.code(), rows, ran.stderr)
}

async fn jobsctl_sets_lists_and_clears_thresholds_and_monitor_fails_on_a_long_wait(redis: Server) {
    let jobs = jobs(&redis);
    let queue = redis.queue();
    assert_eq!(jobs.run(&["waits"]).stdout, "No wait thresholds.\n");

    old_ready_job(&redis, "slow", 120).await;
    Noop {}.dispatch().on_queue("fast").sent_via(&queue).await;
    let set = jobs.run(&["waits", "set", "slow", "60"]);
    assert_eq!(set.code(), Some(0), "{}", set.stderr);
    assert_eq!(
        set.stdout,
        "Queue slow: wait threshold set to 60 s (was none).\n"
    );
    assert_eq!(jobs.run(&["waits", "set", "fast", "60"]).code(), Some(0));
    let mut conn = redis.conn().await;
    let stored: HashMap<String, String> = conn.hgetall(redis.keys().waits()).await.unwrap();
    assert_eq!(stored["slow"], "60");

    // The slow queue's job has waited 120 s, over its 60: exit status 1, naming it only.
    let long = jobs.run(&["monitor", "slow", "fast"]);
    assert_eq!(long.code(), Some(1), "{}", long.stdout);
    assert!(
        long.stderr
            .starts_with("jobsctl: over wait threshold: slow (waited 12"),
        "{}",
        long.stderr
    );
    assert!(long.stderr.contains("threshold 60 s)"), "{}", long.stderr);
    assert!(!long.stderr.contains("fast"), "{}", long.stderr);
    let lines: Vec<&str> = long.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "QUEUE",
            "SIZE",
            "READY",
            "DELAYED",
            "RESERVED",
            "OLDEST",
            "WAIT",
            "THRESHOLD",
            "PAUSED",
            "STATUS"
        ]
    );
    assert!(lines[1].starts_with("slow "), "{}", long.stdout);
    assert!(lines[1].contains(" 1m 0s "), "{}", long.stdout);
    assert!(lines[1].ends_with("LONG WAIT"), "{}", long.stdout);
    assert!(lines[2].ends_with("OK"), "{}", long.stdout);

    // With --max, sizes are checked as well; both problems show.
    let (code, rows, stderr) = monitor(&jobs, &["slow", "fast", "--max", "0"]);
    assert_eq!(code, Some(1));
    assert_eq!(rows[0]["wait_exceeded"], true);
    assert_eq!(rows[0]["wait_threshold_secs"], 60);
    assert!(rows[0]["wait_secs"].as_u64().unwrap() >= 120, "{rows}");
    assert_eq!(
        (&rows[0]["over"], &rows[0]["max"]),
        (&true.into(), &0.into())
    );
    assert_eq!(rows[1]["wait_exceeded"], false);
    assert!(
        stderr.contains("jobsctl: over --max 0: slow (1 jobs), fast (1 jobs)"),
        "{stderr}"
    );
    assert!(stderr.contains("over wait threshold: slow"), "{stderr}");

    // Under the threshold: exit status 0.
    let raised = jobs.run(&["waits", "set", "slow", "600"]);
    assert_eq!(
        raised.stdout,
        "Queue slow: wait threshold set to 600 s (was 60 s).\n"
    );
    let (code, rows, stderr) = monitor(&jobs, &["slow", "fast"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(rows[0]["wait_exceeded"], false);
    assert_eq!(rows[0]["max"], serde_json::Value::Null);
    assert_eq!(stderr, "");

    let listed = jobs.json(&["waits"]);
    let listed: Vec<(&str, u64, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["name"].as_str().unwrap(),
                q["wait_threshold_secs"].as_u64().unwrap(),
                q["wait_exceeded"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, [("fast", 60, false), ("slow", 600, false)]);
    let table = jobs.run(&["waits"]);
    assert!(
        table.stdout.starts_with("QUEUE  THRESHOLD  WAIT"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("slow   10m 0s     2m "),
        "{}",
        table.stdout
    );

    // Seconds must be at least 1; clearing is reported, twice as well.
    assert_eq!(jobs.run(&["waits", "set", "slow", "0"]).code(), Some(2));
    assert_eq!(jobs.run(&["waits", "set", "", "5"]).code(), Some(2));
    let cleared = jobs.run(&["waits", "clear", "slow"]);
    assert_eq!(cleared.stdout, "Queue slow: wait threshold removed.\n");
    let again = jobs.run(&["waits", "clear", "slow"]);
    assert_eq!(
        (again.code(), again.stdout.as_str()),
        (Some(0), "Queue slow had no wait threshold.\n")
    );
    let (code, rows, _) = monitor(&jobs, &["slow"]);
    assert_eq!(code, Some(0));
    assert_eq!(rows[0]["wait_threshold_secs"], serde_json::Value::Null);

    // A threshold written by hand that is not a number is an error, not a silent pass.
    let _: () = conn
        .hset(redis.keys().waits(), "slow", "soon")
        .await
        .unwrap();
    let bad = jobs.run(&["monitor", "slow"]);
    assert_eq!(bad.code(), Some(1));
    assert_eq!(bad.stdout, "");
    assert!(
        bad.stderr
            .contains("the wait threshold stored for queue slow is \"soon\""),
        "{}",
        bad.stderr
    );
}
on_both_layouts!(jobsctl_sets_lists_and_clears_thresholds_and_monitor_fails_on_a_long_wait);

async fn a_delayed_job_past_its_due_time_waits_from_then(redis: Server) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    admin.set_wait("late", 60).await.unwrap();
    // Due in 10 minutes: not waiting.
    Noop {}
        .dispatch()
        .on_queue("late")
        .delay(600)
        .sent_via(&queue)
        .await;
    let stats = admin.queue_stats("late").await.unwrap();
    assert_eq!((stats.overdue_secs, stats.wait_secs), (None, None));
    assert!(!stats.wait_exceeded);

    // Fell due 90 s ago and no worker moved it: it has waited 90 s, not since its dispatch.
    let delayed = redis.queue_keys("late").delayed;
    let mut conn = redis.conn().await;
    let members: Vec<String> = conn.zrange(&delayed, 0, 0).await.unwrap();
    let due = redis.server_time().await - 90.0;
    let _: () = conn.zadd(&delayed, &members[0], due).await.unwrap();
    let stats = admin.queue_stats("late").await.unwrap();
    assert_eq!(stats.oldest_ready_secs, None);
    let overdue = stats.overdue_secs.expect("an overdue job");
    assert!((90..120).contains(&overdue), "{stats:?}");
    assert_eq!(stats.wait_secs, Some(overdue));
    assert!(stats.wait_exceeded);
    let (code, _, stderr) = monitor(&jobs(&redis), &["late"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("over wait threshold: late"), "{stderr}");

    // A worker moves it to the ready list and runs it: nothing waits any more.
    let mut worker = WorkerProcess::start(
        TEST_WORKER,
        redis.url(),
        &["--queue", "late", "--stop-when-empty"],
    );
    assert!(worker.wait_exit(LONG).await.success());
    let stats = admin.queue_stats("late").await.unwrap();
    assert_eq!((stats.wait_secs, stats.wait_exceeded), (None, false));

    // A reservation that expired 75 s ago (its worker died) waits from its expiry.
    let reserved = redis.queue_keys("late").reserved;
    let expired = redis.server_time().await - 75.0;
    let _: () = conn.zadd(&reserved, &members[0], expired).await.unwrap();
    let stats = admin.queue_stats("late").await.unwrap();
    let overdue = stats.overdue_secs.expect("an expired reservation");
    assert!((75..105).contains(&overdue), "{stats:?}");
    assert!(stats.wait_exceeded);
}
on_both_layouts!(a_delayed_job_past_its_due_time_waits_from_then);

async fn a_worker_writes_its_wait_thresholds_at_start(redis: Server) {
    let jobs = jobs(&redis);
    let _: () = redis
        .conn()
        .await
        .hset(redis.keys().waits(), "emails", 5)
        .await
        .unwrap();
    let worker = WorkerProcess::start(
        TEST_WORKER,
        redis.url(),
        &[
            "--queue",
            "emails",
            "--wait",
            "emails=60,billing=300",
            "--wait",
            "reports=3600",
        ],
    );
    let listed = wait_for(LONG, "jobsctl waits lists the worker's thresholds", || {
        let listed = jobs.json(&["waits"]);
        let thresholds: Vec<(String, u64)> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                let name = q["name"].as_str().unwrap().to_owned();
                (name, q["wait_threshold_secs"].as_u64().unwrap())
            })
            .collect();
        async move { (thresholds.len() == 3).then_some(thresholds) }
    })
    .await;
    assert_eq!(
        listed,
        [
            ("billing".to_owned(), 300),
            ("emails".to_owned(), 60),
            ("reports".to_owned(), 3600)
        ]
    );
    assert!(worker
        .lines()
        .iter()
        .any(|l| l.contains("wait thresholds set")
            && l.contains("emails=60,billing=300,reports=3600")));

    // A bad threshold stops the worker before it starts, as any bad option does.
    let mut refused = WorkerProcess::start(TEST_WORKER, redis.url(), &["--wait", "emails=soon"]);
    assert_eq!(refused.wait_exit(LONG).await.code(), Some(2));
}
on_both_layouts!(a_worker_writes_its_wait_thresholds_at_start);

async fn the_dashboard_flags_a_queue_waiting_over_its_threshold(redis: Server) {
    let queue = redis.queue();
    old_ready_job(&redis, "slow", 300).await;
    Noop {}.dispatch().on_queue("fast").sent_via(&queue).await;
    let admin = Admin::new(queue.clone());
    admin.set_wait("slow", 120).await.unwrap();
    admin.set_wait("fast", 120).await.unwrap();
    let dash = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);

    let queues = dash.get_json("/api/queues");
    let row = |name: &str| {
        queues
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("no queue {name} in {queues}"))
            .clone()
    };
    let slow = row("slow");
    assert_eq!(slow["wait_exceeded"], true, "{slow}");
    assert_eq!(slow["wait_threshold_secs"], 120);
    assert!(slow["wait_secs"].as_u64().unwrap() >= 300, "{slow}");
    let fast = row("fast");
    assert_eq!(fast["wait_exceeded"], false, "{fast}");
    assert!(fast["wait_secs"].as_u64().unwrap() < 60, "{fast}");

    // The page renders the flag: its script marks such rows and its style sheet shows them.
    let script = http::get(&dash.addr, "/app.js").unwrap().body;
    assert!(
        script.contains("q.wait_exceeded ? \"long-wait\""),
        "{script}"
    );
    let style = http::get(&dash.addr, "/style.css").unwrap().body;
    assert!(style.contains("tr.long-wait"), "{style}");

    // Cleared, it is no longer flagged.
    admin.clear_wait("slow").await.unwrap();
    let queues = dash.get_json("/api/queues");
    let slow = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "slow")
        .unwrap();
    assert_eq!(
        (&slow["wait_exceeded"], &slow["wait_threshold_secs"]),
        (&false.into(), &serde_json::Value::Null)
    );
}
on_both_layouts!(the_dashboard_flags_a_queue_waiting_over_its_threshold);

async fn the_worker_exports_each_queues_wait_threshold_and_whether_it_is_exceeded(redis: Server) {
    let queue: RedisQueue = redis.queue();
    // A paused queue keeps its old job waiting while the worker serves the queue.
    let _: () = redis
        .conn()
        .await
        .sadd(redis.keys().paused(), "held")
        .await
        .unwrap();
    old_ready_job(&redis, "held", 200).await;
    Noop {}.dispatch().sent_via(&queue).await;
    let addr = format!("127.0.0.1:{}", free_port());
    let _worker = WorkerProcess::start(
        TEST_WORKER,
        redis.url(),
        &[
            "--queue",
            "default,held",
            "--wait",
            "held=60",
            "--metrics-addr",
            &addr,
        ],
    );

    wait_until(
        LONG,
        "the held queue is exported as over its threshold",
        || {
            let exceeded = http::scraped(&addr, r#"jobs_queue_wait_exceeded{queue="held"}"#);
            async move { exceeded == Some(1.0) }
        },
    )
    .await;
    let wait = http::scraped(&addr, r#"jobs_queue_wait_seconds{queue="held"}"#).unwrap();
    assert!((200.0..260.0).contains(&wait), "waited {wait} s");
    assert_eq!(
        http::scraped(&addr, r#"jobs_queue_wait_threshold_seconds{queue="held"}"#),
        Some(60.0)
    );
    // The default queue has no threshold, and its job ran.
    wait_until(LONG, "the default queue is exported as not waiting", || {
        let wait = http::scraped(&addr, r#"jobs_queue_wait_seconds{queue="default"}"#);
        async move { wait == Some(0.0) }
    })
    .await;
    assert_eq!(
        http::scraped(
            &addr,
            r#"jobs_queue_wait_threshold_seconds{queue="default"}"#
        ),
        Some(0.0)
    );
    assert_eq!(
        http::scraped(&addr, r#"jobs_queue_wait_exceeded{queue="default"}"#),
        Some(0.0)
    );
    let body = http::get(&addr, "/metrics").unwrap().body;
    assert!(
        body.contains("# HELP jobs_queue_wait_exceeded"),
        "no help text in {body}"
    );
}
on_both_layouts!(the_worker_exports_each_queues_wait_threshold_and_whether_it_is_exceeded);
