//! The `jobsctl` command against a real redis-server: its output, exit status and the Redis state
//! it leaves, alongside real worker processes for pause, restart and `jobsctl workers`. Each
//! test that talks to Redis runs on one server and on a Redis Cluster (`<test>::one_server`,
//! `<test>::cluster`).

use examples::{Noop, Panic, Sleep};
use redis::AsyncCommands;
use redjob::Payload;
use std::time::Duration;
use tests::jobs_command::JobsCommand;
use tests::scenarios::{billing_worker_with_four_jobs, failed_jobs_on};
use tests::worker_process::WorkerProcess;
use tests::{on_both_layouts, wait_for, SentVia, Server};

const LONG: Duration = Duration::from_secs(30);

fn jobs(redis: &Server) -> JobsCommand {
    JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url())
}

const TEST_WORKER: &str = env!("CARGO_BIN_EXE_test_worker");

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(TEST_WORKER, redis_url, args)
}

async fn failed_lists_shows_retries_and_forgets_with_clear_errors(redis: Server) {
    let jobs = jobs(&redis);
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["mail", "billing"]).await;

    let table = jobs.run(&["failed"]);
    assert_eq!(table.code(), Some(0), "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("#  UUID"), "{}", table.stdout);
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(lines[1].starts_with(&format!("2  {}  billing  panic", uuids[1])));
    assert!(lines[2].contains("panicked: panic job panicking on purpose"));

    let listed = jobs.json(&["failed", "--queue", "mail"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["record"]["uuid"], uuids[0].as_str());
    assert_eq!(listed[0]["position"], 1);

    let shown = jobs.run(&["failed", "show", &uuids[0]]);
    assert_eq!(shown.code(), Some(0));
    assert!(
        shown.stdout.contains("queue:      mail"),
        "{}",
        shown.stdout
    );
    let record = redis.queue().failed_job(&uuids[0]).await.unwrap().unwrap();
    assert!(shown.stdout.contains(&record.payload), "{}", shown.stdout);
    assert!(shown.stdout.contains("attempts:   0"), "{}", shown.stdout);

    let unknown = jobs.run(&["failed", "show", "no-such-uuid"]);
    assert_eq!(unknown.code(), Some(1));
    assert_eq!(unknown.stdout, "");
    assert_eq!(
        unknown.stderr.trim(),
        "jobsctl: no failed job with uuid no-such-uuid"
    );
    let forget_unknown = jobs.run(&["forget", "no-such-uuid"]);
    assert_eq!(forget_unknown.code(), Some(1));
    assert!(forget_unknown
        .stderr
        .contains("no failed job with uuid no-such-uuid"));

    let retried = jobs.run(&["retry", &uuids[0], "no-such-uuid"]);
    assert_eq!(
        retried.code(),
        Some(1),
        "an unknown uuid makes the run fail"
    );
    assert!(retried
        .stdout
        .contains(&format!("Pushed {} back onto queue mail.", uuids[0])));
    assert!(retried.stderr.contains("no-such-uuid"));
    let mut conn = redis.conn().await;
    let mail = redis.queue_keys("mail");
    let ready: Vec<String> = conn.lrange(&mail.ready, 0, -1).await.unwrap();
    assert_eq!(ready.len(), 1);
    let payload = Payload::from_json(&ready[0]).unwrap();
    assert_eq!(
        (payload.uuid.to_string(), payload.attempts),
        (uuids[0].clone(), 0)
    );
    let token: u64 = conn.llen(&mail.notify).await.unwrap();
    assert_eq!(token, 1);

    let forgot = jobs.run(&["forget", &uuids[1]]);
    assert_eq!(forgot.code(), Some(0));
    assert_eq!(
        forgot.stdout.trim(),
        format!("Forgot failed job {}.", uuids[1])
    );
    let keys = redis.keys();
    let left: u64 = conn.hlen(keys.failed_jobs()).await.unwrap();
    let indexed: u64 = conn.zcard(keys.failed_jobs_index()).await.unwrap();
    assert_eq!((left, indexed), (0, 0));
    assert_eq!(jobs.run(&["failed"]).stdout, "No failed jobs.\n");
}
on_both_layouts!(failed_lists_shows_retries_and_forgets_with_clear_errors);

async fn retry_by_range_queue_and_all_and_flush_by_age(redis: Server) {
    let jobs = jobs(&redis);
    let queue = redis.queue();
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["a", "a", "a", "b"]).await;

    let bad = jobs.run(&["retry", "--range", "3"]);
    assert_eq!(bad.code(), Some(1));
    assert!(bad.stderr.contains("expected A-B"), "{}", bad.stderr);
    assert_eq!(jobs.run(&["retry"]).code(), Some(1));

    let range = jobs.json(&["retry", "--range", "2-3"]);
    let retried: Vec<&str> = range["retried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uuid"].as_str().unwrap())
        .collect();
    assert_eq!(retried, [&uuids[1], &uuids[2]]);
    assert_eq!(queue.size("a").await.unwrap().ready, 2);

    let by_queue = jobs.json(&["retry", "--queue", "b"]);
    assert_eq!(by_queue["retried"][0]["uuid"], uuids[3].as_str());
    assert_eq!(queue.size("b").await.unwrap().ready, 1);

    // Make the last record two hours old: only it goes with --hours 1.
    let mut conn = redis.conn().await;
    let old = redis.server_time().await - 7200.0;
    let _: () = conn
        .zadd(redis.keys().failed_jobs_index(), &uuids[0], old)
        .await
        .unwrap();
    Panic {}.dispatch().on_queue("c").sent_via(&queue).await;
    let mut worker = start_worker(redis.url(), &["--queue", "c", "--stop-when-empty"]);
    assert!(worker.wait_exit(LONG).await.success());

    let pruned = jobs.run(&["prune-failed", "--hours", "1"]);
    assert_eq!(pruned.code(), Some(0));
    assert_eq!(
        pruned.stdout.trim(),
        "Deleted 1 failed jobs older than 1 hours."
    );
    assert_eq!(jobs.json(&["failed"]).as_array().unwrap().len(), 1);
    assert_eq!(jobs.json(&["flush", "--hours", "1"])["deleted"], 0);
    assert_eq!(jobs.json(&["flush"])["deleted"], 1);
    let all = jobs.run(&["retry", "all"]);
    assert_eq!(all.code(), Some(0));
    assert_eq!(all.stdout, "No failed jobs to retry.\n");
}
on_both_layouts!(retry_by_range_queue_and_all_and_flush_by_age);

async fn size_monitor_inspect_and_clear(redis: Server) {
    let jobs = jobs(&redis);
    let queue = redis.queue();
    // On a cluster q, others and empty are on three different nodes.
    for _ in 0..3 {
        Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
    }
    let delayed = Noop {}
        .dispatch()
        .on_queue("q")
        .delay(300)
        .sent_via(&queue)
        .await;
    Noop {}.dispatch().on_queue("others").sent_via(&queue).await;

    let size = jobs.run(&["size", "q", "empty"]);
    assert_eq!(size.code(), Some(0));
    let lines: Vec<&str> = size.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "QUEUE  SIZE  READY  DELAYED  RESERVED  OLDEST  PAUSED"
    );
    assert!(
        lines[1].starts_with("q      4     3      1        0         "),
        "{}",
        size.stdout
    );
    assert!(lines[2].starts_with("empty  0     0      0        0         -"));
    let all = jobs.json(&["size"]);
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["others", "q"]);
    assert_eq!(all[1]["ready"], 3);
    assert!(all[1]["oldest_ready_secs"].as_u64().unwrap() < 60);

    let ok = jobs.run(&["monitor", "q", "others", "--max", "4"]);
    assert_eq!(ok.code(), Some(0), "{}", ok.stderr);
    assert!(ok.stdout.lines().nth(1).unwrap().ends_with("OK"));
    let over = jobs.run(&["monitor", "q", "others", "--max", "3"]);
    assert_eq!(over.code(), Some(1));
    assert_eq!(over.stderr.trim(), "jobsctl: over --max 3: q (4 jobs)");
    let over_json = jobs.run(&["--json", "monitor", "q", "--max", "1"]);
    assert_eq!(over_json.code(), Some(1));
    let rows: serde_json::Value = serde_json::from_str(&over_json.stdout).unwrap();
    assert_eq!(
        (rows[0]["over"].as_bool(), rows[0]["size"].as_u64()),
        (Some(true), Some(4))
    );

    let inspected = jobs.json(&["inspect", "q", "delayed"]);
    assert_eq!(inspected.as_array().unwrap().len(), 1);
    assert_eq!(inspected[0]["uuid"], delayed.to_string());
    assert_eq!(inspected[0]["section"], "delayed");
    assert_eq!(inspected[0]["attempts"], 0);
    assert!(inspected[0]["at"].is_string());
    let limited = jobs.json(&["inspect", "q", "--limit", "2"]);
    assert_eq!(limited.as_array().unwrap().len(), 3, "2 ready + 1 delayed");
    let table = jobs.run(&["inspect", "q", "delayed"]);
    assert!(table.stdout.contains("due "), "{}", table.stdout);
    assert!(table.stdout.contains("(in 4m"), "{}", table.stdout);
    let bad = jobs.run(&["inspect", "q", "sideways"]);
    assert_eq!(bad.code(), Some(2), "{}", bad.stderr);

    // No terminal to ask on and no --force: nothing is deleted.
    let refused = jobs.run_with_input(&["clear", "q"], Some("y\n"));
    assert_eq!(refused.code(), Some(1));
    assert!(
        refused.stderr.contains("without --force"),
        "{}",
        refused.stderr
    );
    assert_eq!(queue.size("q").await.unwrap().total(), 4);
    let cleared = jobs.run(&["clear", "q", "--force"]);
    assert_eq!(cleared.code(), Some(0));
    assert_eq!(cleared.stdout.trim(), "Deleted 4 jobs from queue q.");
    assert_eq!(queue.size("q").await.unwrap().total(), 0);
    assert_eq!(queue.size("others").await.unwrap().total(), 1);
}
on_both_layouts!(size_monitor_inspect_and_clear);

#[tokio::test]
async fn an_unreachable_redis_is_a_clear_error() {
    let port = tests::CLOSED_PORT;
    let jobs = JobsCommand::new(
        env!("CARGO_BIN_EXE_test_jobs"),
        &format!("redis://127.0.0.1:{port}/"),
    );
    for args in [&["size", "q"][..], &["failed"], &["restart"], &["workers"]] {
        let ran = jobs.run(args);
        assert_eq!(ran.code(), Some(1), "{args:?}");
        assert!(
            ran.stderr.starts_with("jobsctl: Redis is unreachable"),
            "{args:?}: {}",
            ran.stderr
        );
        assert_eq!(ran.stdout, "");
    }
}

#[tokio::test]
async fn an_unreachable_redis_cluster_is_a_clear_error() {
    let port = tests::CLOSED_PORT;
    let jobs = JobsCommand::new(
        env!("CARGO_BIN_EXE_test_jobs"),
        &format!("redis+cluster://127.0.0.1:{port}/"),
    );
    let ran = jobs.run(&["size", "q"]);
    assert_eq!(ran.code(), Some(1));
    assert_eq!(ran.stdout, "");
    assert!(
        ran.stderr.starts_with("jobsctl: Redis command failed: "),
        "{}",
        ran.stderr
    );
}

async fn a_paused_queue_is_skipped_until_jobs_resume(redis: Server) {
    let jobs = jobs(&redis);
    let queue = redis.queue();
    let paused = jobs.run(&["pause", "slow"]);
    assert_eq!(paused.stdout, "Queue slow paused.\n");
    assert_eq!(
        jobs.run(&["pause", "slow"]).stdout,
        "Queue slow was already paused.\n"
    );
    assert_eq!(jobs.json(&["paused"]), serde_json::json!(["slow"]));
    let waiting = Noop {}.dispatch().on_queue("slow").sent_via(&queue).await;

    let worker = start_worker(redis.url(), &["--queue", "slow,fast"]);
    worker.wait_started().await;
    // Pushed after the paused job, on a lower-priority queue: it runs, the paused one waits.
    let fast = Noop {}.dispatch().on_queue("fast").sent_via(&queue).await;
    worker
        .wait_for_event(LONG, "the fast job is done", |e| {
            e.uuid == fast.to_string() && e.status == "DONE"
        })
        .await;
    assert_eq!(queue.size("slow").await.unwrap().ready, 1);
    assert!(worker.events().iter().all(|e| e.queue != "slow"));
    let size = jobs.json(&["size", "slow"]);
    assert_eq!(size[0]["paused"], true);

    assert_eq!(
        jobs.run(&["resume", "slow"]).stdout,
        "Queue slow resumed.\n"
    );
    worker
        .wait_for_event(Duration::from_secs(10), "the resumed job is done", |e| {
            e.uuid == waiting.to_string() && e.status == "DONE"
        })
        .await;
    assert_eq!(jobs.run(&["paused"]).stdout, "No paused queues.\n");
}
on_both_layouts!(a_paused_queue_is_skipped_until_jobs_resume);

async fn jobs_restart_makes_a_running_worker_exit_0_after_its_current_job(redis: Server) {
    let jobs = jobs(&redis);
    let queue = redis.queue();
    // A restart requested before the worker started does not stop it.
    assert_eq!(jobs.run(&["restart"]).code(), Some(0));
    let mut worker = start_worker(redis.url(), &[]);
    worker.wait_started().await;
    let uuid = Sleep { ms: 1500 }.dispatch().sent_via(&queue).await;
    worker
        .wait_for_event(LONG, "the sleep job runs", |e| {
            e.uuid == uuid.to_string() && e.status == "RUNNING"
        })
        .await;

    let restart = jobs.run(&["restart"]);
    assert_eq!(restart.code(), Some(0));
    assert!(restart.stdout.starts_with("Restart requested at "));
    let mut conn = redis.conn().await;
    let stored: Option<i64> = conn.get(redis.keys().restart()).await.unwrap();
    assert!(stored.is_some());

    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(0));
    let done = worker
        .events()
        .into_iter()
        .any(|e| e.uuid == uuid.to_string() && e.status == "DONE");
    assert!(done, "the running job finished before the worker exited");
    assert!(worker
        .lines()
        .iter()
        .any(|l| l.contains("restart requested")));
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
    assert_eq!(jobs.run(&["workers"]).stdout, "No live workers.\n");
}
on_both_layouts!(jobs_restart_makes_a_running_worker_exit_0_after_its_current_job);

async fn jobs_workers_lists_a_live_worker_with_its_counts(redis: Server) {
    let jobs = jobs(&redis);
    let worker = billing_worker_with_four_jobs(TEST_WORKER, &redis).await;

    let listed = wait_for(LONG, "jobsctl workers counts 4 jobs", || {
        let listed = jobs.json(&["workers"]);
        let found = listed[0]["processed"] == 4;
        async move { found.then_some(listed) }
    })
    .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let record = &listed[0];
    assert_eq!(record["name"], "billing");
    assert_eq!(record["pid"], worker.pid());
    assert_eq!(record["queues"], serde_json::json!(["q1", "q2"]));
    assert_eq!(
        (
            &record["concurrency"],
            &record["running"],
            &record["failed"]
        ),
        (
            &serde_json::json!(3),
            &serde_json::json!(0),
            &serde_json::json!(1)
        )
    );

    let table = jobs.run(&["workers"]);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME     HOST"), "{}", table.stdout);
    let columns: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(columns[0], "billing");
    assert_eq!(columns[2], worker.pid().to_string());
    assert_eq!(&columns[3..7], ["q1,q2", "0/3", "4", "1"]);

    let recent = jobs.json(&["recent", "q2"]);
    assert_eq!(recent[0]["outcome"], "failed");
    assert_eq!(recent[0]["job"], "panic");
    let table = jobs.run(&["recent", "q1", "--limit", "2"]);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].starts_with("FINISHED  OUTCOME  UUID"),
        "{}",
        table.stdout
    );
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(lines[1].contains(" DONE "), "{}", table.stdout);
    assert_eq!(jobs.run(&["recent", "nothing"]).stdout, "No recent jobs.\n");
}
on_both_layouts!(jobs_workers_lists_a_live_worker_with_its_counts);

async fn clear_asks_on_a_terminal_and_deletes_only_when_confirmed(redis: Server) {
    let jobs = jobs(&redis);
    let queue = redis.queue();
    for _ in 0..2 {
        Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
    }
    let declined = jobs.run_on_terminal(&["clear", "q"], "n\n");
    assert_eq!(declined.code(), Some(1), "{}", declined.stdout);
    assert!(
        declined
            .stdout
            .contains("Delete all 2 jobs of queue q (ready, delayed and reserved)? [y/N]"),
        "{}",
        declined.stdout
    );
    assert!(declined
        .stdout
        .contains("jobsctl: queue q not cleared: not confirmed"));
    assert_eq!(queue.size("q").await.unwrap().total(), 2);

    let confirmed = jobs.run_on_terminal(&["clear", "q"], "y\n");
    assert_eq!(confirmed.code(), Some(0), "{}", confirmed.stdout);
    assert!(confirmed.stdout.contains("Deleted 2 jobs from queue q."));
    assert_eq!(queue.size("q").await.unwrap().total(), 0);
}
on_both_layouts!(clear_asks_on_a_terminal_and_deletes_only_when_confirmed);
