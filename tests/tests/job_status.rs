//! Watching and stopping jobs, end to end against worker processes: a tracked job's status
//! and progress read from this process while a worker runs it, its result waited for, its
//! failure, results that expire, and cancellation of waiting, running, blocking and finished
//! jobs, a worker killed while it stops one included.

use examples::{Countdown, Echo, Sum, FAILED_HOOKS_KEY};
use futures_util::StreamExt;
use redis::AsyncCommands;
use redjob::status::{Cancelled, JobState, Tracked, WaitError};
use redjob::RedisQueue;
use std::time::{Duration, Instant};
use tests::worker_process::WorkerProcess;
use tests::{wait_for, wait_until};
use tests::{SentVia, TestRedis, TrackedVia};
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

fn countdown(steps: u32, step_ms: u64, mode: &str) -> Countdown {
    Countdown {
        steps,
        step_ms,
        mode: mode.to_owned(),
    }
}

/// A countdown of 600 steps of 100 ms (a minute), tracked, pushed through `queue` with `tries`.
async fn long_countdown(queue: &RedisQueue, mode: &str, tries: u32) -> Tracked<Countdown> {
    countdown(600, 100, mode)
        .dispatch()
        .tries(tries)
        .tracked_via(queue)
        .await
}

/// A sum of `numbers`, `step_ms` apart.
fn sum(numbers: &[u64], step_ms: u64) -> Sum {
    Sum {
        numbers: numbers.to_vec(),
        step_ms,
        fail: None,
    }
}

/// Waits until the job `uuid` runs, as its status says, and returns that status.
async fn running(queue: &RedisQueue, uuid: Uuid) -> redjob::status::JobStatus {
    wait_for(LONG, "the job runs", || async move {
        let status = queue.status(uuid).await.unwrap();
        (status.state == JobState::Running).then_some(status)
    })
    .await
}

/// The failed() hook entries recorded for `uuid`: their reasons.
async fn hook_reasons(redis: &TestRedis, uuid: Uuid) -> Vec<String> {
    let mut conn = redis.conn().await;
    let entries: Vec<String> = conn.lrange(FAILED_HOOKS_KEY, 0, -1).await.unwrap();
    entries
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap())
        .filter(|e| e["uuid"] == uuid.to_string())
        .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_tracked_jobs_progress_is_seen_from_another_process_and_its_result_waited_for() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = sum(&[1, 2, 3, 4, 5], 300)
        .dispatch()
        .tracked_via(&queue)
        .await;
    let queued = queue.status(*job).await.unwrap();
    assert_eq!(queued.state, JobState::Queued);
    assert_eq!(queued.job.as_deref(), Some("sum"));
    assert_eq!(queued.queue.as_deref(), Some("default"));

    let _worker = start_worker(redis.url(), &["--name", "w1"]);
    let reader = redis.queue();
    let seen = wait_for(LONG, "progress past the first number", || async {
        let status = reader.status(*job).await.unwrap();
        let done = status.progress.as_ref().and_then(|p| p["done"].as_u64());
        (status.state == JobState::Running && done >= Some(1)).then_some(status)
    })
    .await;
    assert_eq!(seen.progress.as_ref().unwrap()["of"], 5);
    assert_eq!(seen.attempt, 1);
    assert!(
        seen.worker.as_deref().is_some_and(|w| w.starts_with("w1@")),
        "{seen:?}"
    );

    let sum: u64 = job.wait(LONG).await.unwrap();
    assert_eq!(sum, 15);
    let done = reader.status(*job).await.unwrap();
    assert_eq!(done.state, JobState::Done);
    assert_eq!(done.result, Some(serde_json::json!(15)));
    assert_eq!(
        done.progress,
        Some(serde_json::json!({ "done": 5, "of": 5 }))
    );
    // Kept for the job type's result_ttl (60 s) from now on.
    let mut conn = redis.conn().await;
    let ttl: i64 = conn.pttl(format!("jobs:status:{}", *job)).await.unwrap();
    assert!((50_000..=60_000).contains(&ttl), "{ttl}");
}

#[tokio::test]
async fn wait_returns_the_failure_and_times_out() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let failing = Sum {
        numbers: vec![1],
        step_ms: 0,
        fail: Some("bad input".into()),
    }
    .dispatch()
    .tracked_via(&queue)
    .await;
    let idle = sum(&[1], 0)
        .dispatch()
        .on_queue("nobody-works-here")
        .tracked_via(&queue)
        .await;
    let _worker = start_worker(redis.url(), &["--tries", "1"]);

    match failing.wait(LONG).await {
        Err(WaitError::Failed(reason)) => assert!(reason.contains("bad input"), "{reason}"),
        other => panic!("expected the failure, got {other:?}"),
    }
    let status = queue.status(*failing).await.unwrap();
    assert_eq!(status.state, JobState::Failed);

    let started = Instant::now();
    match idle.wait(Duration::from_millis(700)).await {
        Err(WaitError::Timeout(after)) => assert_eq!(after, Duration::from_millis(700)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(queue.status(*idle).await.unwrap().state, JobState::Queued);
}

#[tokio::test]
async fn results_expire() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let _worker = start_worker(redis.url(), &[]);
    let job = Echo { text: "hi".into() }
        .dispatch()
        .tracked_via(&queue)
        .await;
    assert_eq!(job.wait(LONG).await.unwrap(), "hi");
    // Echo keeps its result one second.
    wait_until(LONG, "the result expired", || async {
        queue.status(*job).await.unwrap().state == JobState::Unknown
    })
    .await;
    let mut conn = redis.conn().await;
    let exists: bool = conn.exists(format!("jobs:status:{}", *job)).await.unwrap();
    assert!(!exists);
}

#[tokio::test]
async fn a_cooperative_job_is_cancelled_at_once_and_not_retried() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = long_countdown(&queue, "stop", 3).await;
    let mut worker = start_worker(redis.url(), &["--cancel-grace", "30"]);
    running(&queue, *job).await;

    let asked = Instant::now();
    assert_eq!(queue.cancel(*job).await.unwrap(), Cancelled::Running);
    let ended = job.wait(LONG).await;
    let took = asked.elapsed();
    eprintln!("cancel asked to the job's outcome read: {took:?}");
    assert!(matches!(ended, Err(WaitError::Cancelled)), "{ended:?}");
    // Well under the grace: the handler saw the cancel and returned. (The note gives the
    // figure measured; this bound leaves room for a loaded machine.)
    assert!(took < Duration::from_secs(2), "{took:?}");

    let status = queue.status(*job).await.unwrap();
    assert_eq!((status.state, status.attempt), (JobState::Cancelled, 1));
    assert_eq!(status.error.as_deref(), Some("cancelled"));
    wait_until(LONG, "the failed() hook ran", || async {
        hook_reasons(&redis, *job).await == ["cancelled"]
    })
    .await;
    let mut conn = redis.conn().await;
    let record: String = conn.hget("failed_jobs", job.to_string()).await.unwrap();
    assert!(record.contains("\"exception\":\"cancelled\""), "{record}");
    let flagged: Option<f64> = conn.zscore("jobs:cancel", job.to_string()).await.unwrap();
    assert_eq!(flagged, None, "the request is removed when the job settles");
    let runs = worker
        .events()
        .into_iter()
        .filter(|e| e.uuid == job.to_string() && e.status == "RUNNING")
        .count();
    assert_eq!(runs, 1, "not retried");
    assert!(worker.is_running());
}

#[tokio::test]
async fn a_job_that_ignores_its_cancel_is_stopped_after_the_grace() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = long_countdown(&queue, "ignore", 1).await;
    let _worker = start_worker(redis.url(), &["--cancel-grace", "1"]);
    running(&queue, *job).await;
    let asked = Instant::now();
    assert_eq!(queue.cancel(*job).await.unwrap(), Cancelled::Running);
    let ended = job.wait(LONG).await;
    let took = asked.elapsed();
    assert!(matches!(ended, Err(WaitError::Cancelled)), "{ended:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_job_that_blocks_its_thread_is_cancelled_by_the_watchdog() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = countdown(600, 200, "block")
        .dispatch()
        .tracked_via(&queue)
        .await;
    let mut worker = start_worker(redis.url(), &["--cancel-grace", "1"]);
    running(&queue, *job).await;
    assert_eq!(queue.cancel(*job).await.unwrap(), Cancelled::Running);
    let exit = worker.wait_exit(LONG).await;
    assert_eq!(exit.code(), Some(redjob_worker::WATCHDOG_EXIT_CODE as i32));
    assert!(
        worker
            .lines()
            .iter()
            .any(|line| line.contains("a cancel cannot interrupt")),
        "{:?}",
        worker.lines()
    );
    let status = queue.status(*job).await.unwrap();
    assert_eq!(status.state, JobState::Cancelled);
}

#[tokio::test]
async fn waiting_jobs_are_cancelled_without_running() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let ready = countdown(1, 1, "stop").dispatch().tracked_via(&queue).await;
    let delayed = countdown(1, 1, "stop")
        .dispatch()
        .delay(Duration::from_millis(1500))
        .tracked_via(&queue)
        .await;
    assert_eq!(
        queue.cancel(*ready).await.unwrap(),
        Cancelled::Waiting(JobState::Queued)
    );
    assert_eq!(
        queue.cancel(*delayed).await.unwrap(),
        Cancelled::Waiting(JobState::Delayed)
    );
    let worker = start_worker(redis.url(), &[]);
    for job in [&ready, &delayed] {
        assert!(matches!(job.wait(LONG).await, Err(WaitError::Cancelled)));
        // The hook runs once the failure is recorded, which is what the wait sees.
        wait_until(LONG, "the failed() hook ran", || async {
            hook_reasons(&redis, **job).await == ["cancelled"]
        })
        .await;
    }
    let ran: Vec<_> = worker
        .events()
        .into_iter()
        .filter(|e| e.status == "RUNNING")
        .collect();
    assert!(ran.is_empty(), "{ran:?}");
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn cancelling_a_finished_job_is_a_clear_no_op() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let _worker = start_worker(redis.url(), &[]);
    let job = sum(&[2, 3], 0).dispatch().tracked_via(&queue).await;
    assert_eq!(job.wait(LONG).await.unwrap(), 5);
    assert_eq!(
        queue.cancel(*job).await.unwrap(),
        Cancelled::Finished(JobState::Done)
    );
    let mut conn = redis.conn().await;
    let flagged: u64 = conn.zcard("jobs:cancel").await.unwrap();
    assert_eq!(flagged, 0);
    assert_eq!(queue.status(*job).await.unwrap().state, JobState::Done);
    assert_eq!(
        queue.cancel(Uuid::new_v4()).await.unwrap(),
        Cancelled::Unknown
    );
}

#[tokio::test]
async fn a_job_being_cancelled_whose_worker_is_killed_does_not_run_again() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = long_countdown(&queue, "ignore", 5).await;
    let args = ["--cancel-grace", "60", "--retry-after", "2"];
    let mut first = start_worker(redis.url(), &args);
    running(&queue, *job).await;
    assert_eq!(queue.cancel(*job).await.unwrap(), Cancelled::Running);
    first.kill();
    let second = start_worker(redis.url(), &args);
    assert!(matches!(job.wait(LONG).await, Err(WaitError::Cancelled)));
    let ran = second
        .events()
        .into_iter()
        .filter(|e| e.uuid == job.to_string() && e.status == "RUNNING")
        .count();
    assert_eq!(ran, 0, "the second worker settled it without running it");
    let status = queue.status(*job).await.unwrap();
    assert_eq!(status.state, JobState::Cancelled);
}

#[tokio::test]
async fn a_jobs_last_progress_is_an_event_before_its_outcome_when_the_job_ends_at_once() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    queue.set_events("quick", Some(1000)).await.unwrap();
    // Reports 0, 50 and 100 a millisecond apart: the first is written at once, the others wait
    // for the writer's next turn (250 ms on), which comes after the job has ended.
    let job = countdown(2, 1, "sleep")
        .dispatch()
        .on_queue("quick")
        .tracked_via(&queue)
        .await;
    let _worker = start_worker(redis.url(), &["--queue", "quick"]);
    job.wait(LONG).await.unwrap();

    // The job's events up to its outcome, which was written when the job settled.
    let mut stream = std::pin::pin!(queue.events_after("quick", "0-0"));
    let mut events = Vec::new();
    while events
        .last()
        .is_none_or(|e: &redjob::status::QueueEvent| e.event != "completed")
    {
        let event = tokio::time::timeout(LONG, stream.next()).await.unwrap();
        events.push(event.unwrap());
    }
    assert!(
        events.iter().all(|e| e.uuid == job.to_string()),
        "{events:?}"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"queued"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"completed"), "{kinds:?}");
    let progress: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e.event == "progress")
        .filter_map(|e| e.data.as_ref())
        .collect();
    assert_eq!(
        progress.last(),
        Some(&&serde_json::json!(100)),
        "the last report is the last progress event: {events:?}"
    );
    assert_eq!(
        kinds[kinds.len() - 2],
        "progress",
        "and comes just before the outcome: {kinds:?}"
    );
    let status = queue.status(*job).await.unwrap();
    assert_eq!(status.progress, Some(serde_json::json!(100)));
}

#[tokio::test]
async fn events_arrive_in_order_with_none_missing_under_four_workers() {
    use futures_util::StreamExt;
    use std::collections::HashMap;

    let redis = TestRedis::start();
    let queue = redis.queue();
    queue.set_events("ev", Some(100_000)).await.unwrap();
    let reader = redis.queue();
    let live = reader.events("ev").await.unwrap();
    // Every job's last event: 300 no-ops and 20 sums complete, 10 flaky jobs complete on
    // their second attempt.
    let collected = tokio::spawn(async move {
        let mut live = std::pin::pin!(live);
        let (mut events, mut completed) = (Vec::new(), 0);
        while completed < 330 {
            let event: redjob::status::QueueEvent = live.next().await.unwrap();
            completed += usize::from(event.event == "completed");
            events.push(event);
        }
        events
    });

    let mut bulk = redjob::Bulk::via(&queue);
    for _ in 0..300 {
        bulk.add(examples::Noop {}.dispatch().on_queue("ev"))
            .unwrap();
    }
    bulk.send().await.unwrap();
    let mut expected: HashMap<String, Vec<&str>> = HashMap::new();
    for _ in 0..20 {
        let job = sum(&[1, 2, 3], 300)
            .dispatch()
            .on_queue("ev")
            .tracked_via(&queue)
            .await;
        // Three progress reports 300 ms apart: written at most one per 250 ms, so a loaded
        // machine may fold two into one; the last is always written, before the outcome.
        let events = vec!["queued", "active", "progress", "completed"];
        expected.insert(job.to_string(), events);
    }
    for _ in 0..10 {
        let uuid = examples::Flaky { fail_times: 1 }
            .dispatch()
            .on_queue("ev")
            .tries(2)
            .via(&queue)
            .await
            .unwrap();
        let events = vec!["queued", "active", "released", "active", "completed"];
        expected.insert(uuid.to_string(), events);
    }
    let _workers: Vec<WorkerProcess> = (0..4)
        .map(|_| start_worker(redis.url(), &["--queue", "ev", "--concurrency", "8"]))
        .collect();

    let events = tokio::time::timeout(LONG, collected)
        .await
        .expect("every event within 30 s")
        .unwrap();
    let mut by_job: HashMap<String, Vec<&str>> = HashMap::new();
    for event in &events {
        by_job
            .entry(event.uuid.clone())
            .or_default()
            .push(event.event.as_str());
    }
    assert_eq!(by_job.len(), 330);
    for (uuid, seen) in &mut by_job {
        // Repeated progress events count as one here (see above).
        seen.dedup_by(|a, b| *a == "progress" && *b == "progress");
        let wanted = expected
            .get(uuid)
            .cloned()
            .unwrap_or_else(|| vec!["queued", "active", "completed"]);
        assert_eq!(seen, &wanted, "{uuid}");
    }
    // The live reader saw them in the stream's order: read again from its start, the stream
    // gives the same events, in the same order.
    let replayed: Vec<redjob::status::QueueEvent> = reader
        .events_after("ev", "0-0")
        .take(events.len())
        .collect()
        .await;
    assert_eq!(replayed, events);
    let sum_done = events
        .iter()
        .find(|e| {
            e.event == "completed"
                && expected
                    .get(&e.uuid)
                    .is_some_and(|x| x.contains(&"progress"))
        })
        .unwrap();
    assert_eq!(
        sum_done.data,
        Some(serde_json::json!(6)),
        "a tracked job's result rides along"
    );
}

#[tokio::test]
async fn jobsctl_shows_a_status_cancels_a_job_and_tails_a_queues_events() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let jobs = tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let switched = jobs.json(&["events", "tools", "--on", "--max", "500"]);
    assert_eq!(switched["events"], true);
    assert_eq!(queue.events_on().await.unwrap()["tools"], 500);

    let added = sum(&[4, 5], 0)
        .dispatch()
        .on_queue("tools")
        .tracked_via(&queue)
        .await;
    let waiting = countdown(1, 1, "stop")
        .dispatch()
        .on_queue("tools")
        .delay(3600)
        .tracked_via(&queue)
        .await;
    let _worker = start_worker(redis.url(), &["--queue", "tools"]);
    assert_eq!(added.wait(LONG).await.unwrap(), 9);

    let shown = jobs.json(&["status", &added.to_string()]);
    assert_eq!(shown["state"], "done");
    assert_eq!(shown["result"], 9);
    assert_eq!(shown["job"], "sum");
    let text = jobs.run(&["status", &added.to_string()]);
    assert!(
        text.stdout.contains("done") && text.stdout.contains("result"),
        "{}",
        text.stdout
    );
    let unknown = jobs.run(&["status", &Uuid::new_v4().to_string()]);
    assert_eq!(unknown.code(), Some(1), "nothing known: exit status 1");

    let cancelled = jobs.json(&["cancel", &waiting.to_string()]);
    assert_eq!(cancelled["found"], "waiting");
    assert_eq!(cancelled["state"], "delayed");
    let finished = jobs.run(&["cancel", &added.to_string()]);
    assert!(
        finished.status.success() && finished.stdout.contains("already finished (done)"),
        "{finished:?}"
    );

    // The sum's three events, read from the start of the stream.
    let tail = jobs.run(&[
        "--json", "events", "tools", "--after", "0-0", "--count", "4",
    ]);
    assert!(tail.status.success(), "{tail:?}");
    let events: Vec<serde_json::Value> = tail
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["queued", "queued", "active", "progress"],
        "{events:?}"
    );
    assert_eq!(events[0]["uuid"], added.to_string());
    assert_eq!(events[1]["uuid"], waiting.to_string());
}

#[tokio::test]
async fn a_batchs_then_callback_reads_its_jobs_results() {
    use examples::{TotalOfResults, TOTALS_KEY};
    use redjob::workflow::Batch;
    let redis = TestRedis::start();
    let queue = redis.queue();
    let batch = Batch::new()
        .job(sum(&[1, 2], 0).dispatch())
        .job(sum(&[10], 0).dispatch())
        .job(sum(&[100, 200], 0).dispatch())
        .then(TotalOfResults {}.dispatch())
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let _worker = start_worker(redis.url(), &[]);
    let mut conn = redis.conn().await;
    let total = wait_for(LONG, "the then callback recorded its total", || {
        let mut conn = conn.clone();
        async move {
            let entries: Vec<String> = conn.lrange(TOTALS_KEY, 0, -1).await.unwrap();
            entries.first().cloned()
        }
    })
    .await;
    let total: serde_json::Value = serde_json::from_str(&total).unwrap();
    assert_eq!(total["batch"], batch.to_string());
    assert_eq!(total["total"], 313);
    assert_eq!(total["results"], 3);
    let results = queue.batch_results(batch).await.unwrap();
    assert_eq!(results.len(), 3);
    let kept: i64 = conn
        .pttl(format!("jobs:batch:{batch}:results"))
        .await
        .unwrap();
    assert!(kept > 0, "the results expire with the records: {kept}");
}

/// Dispatches a no-op to the queue `steady` through `queue`; returns its uuid.
async fn push_noop(queue: &RedisQueue) -> String {
    examples::Noop {}
        .dispatch()
        .on_queue("steady")
        .sent_via(queue)
        .await
        .to_string()
}

/// Dispatches a no-op to the queue `steady` through `queue` every 50 ms for `how_long`; returns
/// each job's uuid with the time it was dispatched.
async fn dispatch_steadily(queue: &RedisQueue, how_long: Duration) -> Vec<(String, Instant)> {
    let started = Instant::now();
    let mut sent = Vec::new();
    while started.elapsed() < how_long {
        let at = Instant::now();
        sent.push((push_noop(queue).await, at));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sent
}

/// The server times (seconds) of the commands `monitor` saw whose line holds `command`.
fn times_of(monitor: &tests::monitor::Monitor, command: &str) -> Vec<f64> {
    monitor
        .lines()
        .iter()
        .filter(|line| line.contains(command))
        .filter_map(|line| line.split(' ').next()?.parse().ok())
        .collect()
}

#[tokio::test]
async fn a_dispatcher_keeps_the_events_switch_fresh_between_its_pushes() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let monitor = tests::monitor::Monitor::start(redis.port()).await;
    let echo = |conn: &mut redis::aio::MultiplexedConnection, text: &'static str| {
        let mut conn = conn.clone();
        async move {
            let _: String = redis::cmd("ECHO")
                .arg(text)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    };

    push_noop(&queue).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    echo(&mut conn, "second push").await;
    push_noop(&queue).await;
    echo(&mut conn, "end").await;
    wait_until(LONG, "the monitor sees the end", || {
        let seen = monitor
            .lines()
            .iter()
            .any(|l| l.ends_with("\"ECHO\" \"end\""));
        async move { seen }
    })
    .await;

    // Each command the handle sent: a read of the switch, a push, or the test's mark.
    let sent: Vec<&str> = monitor
        .lines()
        .iter()
        .filter_map(|line| match line {
            l if l.contains("\"HGETALL\"") => Some("read"),
            l if l.contains("\"EVALSHA\"") => Some("push"),
            l if l.ends_with("\"ECHO\" \"second push\"") => Some("mark"),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent[0], "read",
        "the first push reads the switch first: {sent:?}"
    );
    // Then the handle reads it every 0.8 s in the background, and the push 3 s later goes by
    // what it knows.
    let mark = sent.iter().position(|s| *s == "mark").unwrap();
    let behind = sent[1..mark].iter().filter(|s| **s == "read").count();
    assert!(behind >= 2, "{behind} reads between the pushes: {sent:?}");
    assert_eq!(
        sent[mark + 1],
        "push",
        "the second push read the switch first: {sent:?}"
    );
}

#[tokio::test]
async fn a_dropped_handle_stops_reading_the_events_switch() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    push_noop(&queue).await;
    drop(queue);
    // Its reader ends at its next turn, within 0.8 s.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let monitor = tests::monitor::Monitor::start(redis.port()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reads = times_of(&monitor, "\"HGETALL\"");
    assert!(
        reads.is_empty(),
        "reads after the handle was dropped: {reads:?}"
    );
}

#[tokio::test]
async fn a_steady_dispatcher_notices_the_events_switch_within_a_second() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let operator = redis.queue();
    let dispatching = tokio::spawn({
        let queue = queue.clone();
        async move { dispatch_steadily(&queue, Duration::from_secs(4)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    operator.set_events("steady", Some(10_000)).await.unwrap();
    let switched = Instant::now();
    let sent = dispatching.await.unwrap();

    // The stream holds every event already: read until it gives no more.
    let mut events = std::pin::pin!(queue.events_after("steady", "0-0"));
    let mut queued = std::collections::HashSet::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(500), events.next()).await
    {
        if event.event == "queued" {
            queued.insert(event.uuid);
        }
    }
    let late: Vec<&String> = sent
        .iter()
        .filter(|(_, at)| at.duration_since(switched) > Duration::from_millis(1200))
        .map(|(uuid, _)| uuid)
        .collect();
    assert!(
        late.len() > 20,
        "{} jobs dispatched after the switch",
        late.len()
    );
    let missing: Vec<&&String> = late
        .iter()
        .filter(|uuid| !queued.contains(**uuid))
        .collect();
    assert!(
        missing.is_empty(),
        "jobs dispatched over a second after the switch without a queued event: {missing:?}"
    );
}
