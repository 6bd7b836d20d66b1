//! End-to-end tests of the worker process against a real redis-server: retries and failures,
//! backoff, priority, panics and random bytes, crashes, signals and stop conditions. The
//! malformed-input set is in `malformed_input.rs`.

use examples::{now_ms, Flaky, Noop, Panic, Record, Sleep, StopAware, RECORDS_KEY};
use redis::AsyncCommands;
use redjob::admin::Admin;
use redjob::{Bulk, Payload, RedisQueue};
use std::collections::HashMap;
use std::time::Duration;
use tests::records::runs_in_order;
use tests::worker_process::WorkerProcess;
use tests::{sent_in_bulk, wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// Runs a worker with `--stop-when-empty` until it exits, which it must do with status 0.
async fn run_until_empty(redis_url: &str, args: &[&str]) -> WorkerProcess {
    let args = [args, &["--stop-when-empty"]].concat();
    let mut worker = start_worker(redis_url, &args);
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    worker
}

async fn failed_records(redis: &TestRedis) -> Vec<serde_json::Value> {
    let mut conn = redis.conn().await;
    let records: Vec<String> = conn.hvals("failed_jobs").await.unwrap();
    records
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect()
}

#[tokio::test]
async fn a_flaky_job_succeeds_on_its_third_attempt_with_three_tries() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Flaky { fail_times: 2 }.dispatch().sent_via(&queue).await;
    let worker = run_until_empty(redis.url(), &["--tries", "3"]).await;

    let events: Vec<_> = worker
        .events()
        .into_iter()
        .filter(|e| e.uuid == uuid.to_string() && e.status != "RUNNING")
        .map(|e| (e.status, e.attempt))
        .collect();
    assert_eq!(
        events,
        [
            ("RELEASED".to_owned(), 1),
            ("RELEASED".to_owned(), 2),
            ("DONE".to_owned(), 3)
        ]
    );
    assert!(failed_records(&redis).await.is_empty());
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn a_flaky_job_fails_into_the_failed_store_with_two_tries() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Flaky { fail_times: 2 }.dispatch().sent_via(&queue).await;
    run_until_empty(redis.url(), &["--tries", "2"]).await;

    let record = queue
        .failed_job(&uuid.to_string())
        .await
        .unwrap()
        .expect("a failed-job record");
    assert_eq!(record.queue, "default");
    assert_eq!(record.connection, "redis");
    assert!(
        record
            .exception
            .contains("flaky job failing on purpose (attempt 2"),
        "{}",
        record.exception
    );
    // The record keeps the payload as it was before the failing reservation.
    let payload = Payload::from_json(&record.payload).unwrap();
    assert_eq!((payload.uuid, payload.attempts), (uuid, 1));
    let mut conn = redis.conn().await;
    let indexed: Option<f64> = conn
        .zscore("failed_jobs:index", uuid.to_string())
        .await
        .unwrap();
    assert!(indexed.is_some());
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn job_options_beat_worker_options() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // The job allows 3 tries; the worker's --tries 1 must not fail it early.
    let uuid = Flaky { fail_times: 2 }
        .dispatch()
        .tries(3)
        .sent_via(&queue)
        .await;
    let worker = run_until_empty(redis.url(), &["--tries", "1"]).await;
    let done = worker
        .events()
        .into_iter()
        .find(|e| e.uuid == uuid.to_string() && e.status == "DONE")
        .expect("the job finished");
    assert_eq!(done.attempt, 3);
}

/// A job released while a pop was in flight must be popped again before `--stop-when-empty`
/// calls the queues empty: that pop may have looked before the release put it back.
#[tokio::test]
async fn stop_when_empty_waits_for_jobs_released_while_a_pop_was_out() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuids = sent_in_bulk(&queue, (0..200).map(|_| Flaky { fail_times: 1 }.dispatch())).await;
    let worker = run_until_empty(redis.url(), &["--tries", "2", "--concurrency", "4"]).await;
    let done: std::collections::HashSet<String> =
        worker.done().into_iter().map(|e| e.uuid).collect();
    let missing = uuids.iter().filter(|u| !done.contains(*u)).count();
    assert_eq!(missing, 0, "jobs not finished when the worker stopped");
}

#[tokio::test]
async fn backoff_lists_are_honoured_and_the_last_value_repeats() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Flaky { fail_times: 3 }.dispatch().sent_via(&queue).await;
    let worker = start_worker(redis.url(), &["--tries", "4", "--backoff", "1,2"]);
    worker
        .wait_for_event(LONG, "attempt 4 finished", |e| {
            e.uuid == uuid.to_string() && e.status == "DONE"
        })
        .await;
    let starts: Vec<f64> = worker
        .events()
        .into_iter()
        .filter(|e| e.uuid == uuid.to_string() && e.status == "RUNNING")
        .map(|e| e.at_ms)
        .collect();
    assert_eq!(starts.len(), 4);
    let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, expected) in gaps.iter().zip([1000.0, 2000.0, 2000.0]) {
        assert!(
            *gap >= expected - 5.0 && *gap < expected + 1000.0,
            "gaps between attempts {gaps:?}, expected about 1 s, 2 s, 2 s"
        );
    }
}

#[tokio::test]
async fn queues_are_taken_in_strict_priority_order() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    for _ in 0..5 {
        Noop {}.dispatch().on_queue("low").sent_via(&queue).await;
    }
    for _ in 0..5 {
        Noop {}.dispatch().on_queue("high").sent_via(&queue).await;
    }
    let worker = run_until_empty(redis.url(), &["--queue", "high,low", "--concurrency", "1"]).await;
    let order: Vec<String> = worker.done().into_iter().map(|e| e.queue).collect();
    assert_eq!(order, [vec!["high"; 5], vec!["low"; 5]].concat());
}

#[tokio::test]
async fn a_panicking_job_ends_in_the_failed_store_while_the_worker_goes_on() {
    // Payloads no job can run are in malformed_input.rs.
    let redis = TestRedis::start();
    let queue = redis.queue();
    let panic = Panic {}.dispatch().sent_via(&queue).await;
    let noop = Noop {}.dispatch().sent_via(&queue).await;

    let worker = run_until_empty(redis.url(), &[]).await;

    let reasons: Vec<String> = failed_records(&redis)
        .await
        .iter()
        .map(|r| r["exception"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons, ["panicked: panic job panicking on purpose"]);
    let record = queue.failed_job(&panic.to_string()).await.unwrap().unwrap();
    // The record keeps the payload as pushed: attempts 0 again.
    assert_eq!(Payload::from_json(&record.payload).unwrap().attempts, 0);
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == noop.to_string() && e.status == "DONE"));
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn an_expired_reservation_of_a_killed_worker_comes_back_with_attempts_2_and_runs() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Sleep { ms: 2000 }.dispatch().sent_via(&queue).await;
    let mut first = start_worker(redis.url(), &["--retry-after", "1", "--tries", "3"]);
    first
        .wait_for_event(LONG, "the first worker started the job", |e| {
            e.status == "RUNNING"
        })
        .await;
    first.signal("KILL");
    first.wait_exit(LONG).await;

    let mut conn = redis.conn().await;
    let reserved: Vec<String> = conn.zrange("queues:default:reserved", 0, -1).await.unwrap();
    assert_eq!(reserved.len(), 1, "the killed worker's reservation stays");
    assert_eq!(Payload::from_json(&reserved[0]).unwrap().attempts, 1);

    let second = start_worker(redis.url(), &["--retry-after", "10", "--tries", "3"]);
    let done = second
        .wait_for_event(LONG, "the second worker finished the job", |e| {
            e.uuid == uuid.to_string() && e.status == "DONE"
        })
        .await;
    assert_eq!(done.attempt, 2);
    wait_until(LONG, "the queue is empty", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;
}

#[tokio::test]
async fn sigterm_puts_unfinished_jobs_back_at_once_with_their_attempt_given_back() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let long = Sleep { ms: 60_000 }.dispatch().sent_via(&queue).await;
    let short = Sleep { ms: 300 }.dispatch().sent_via(&queue).await;
    let mut worker = start_worker(redis.url(), &["--grace", "1", "--tries", "1"]);
    worker
        .wait_for_event(LONG, "both jobs are running", |e| {
            e.uuid == short.to_string() && e.status == "RUNNING"
        })
        .await;
    worker.signal("TERM");
    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(0));

    let events = worker.events();
    assert!(events
        .iter()
        .any(|e| e.uuid == short.to_string() && e.status == "DONE"));
    assert!(events
        .iter()
        .any(|e| e.uuid == long.to_string() && e.status == "INTERRUPTED"));
    let mut conn = redis.conn().await;
    let reserved: u64 = conn.zcard("queues:default:reserved").await.unwrap();
    assert_eq!(reserved, 0, "nothing is left reserved");
    let delayed: Vec<(String, f64)> = conn
        .zrange_withscores("queues:default:delayed", 0, -1)
        .await
        .unwrap();
    assert_eq!(delayed.len(), 1);
    let payload = Payload::from_json(&delayed[0].0).unwrap();
    assert_eq!(
        (payload.uuid, payload.attempts, payload.interruptions),
        (long, 0, 1),
        "the attempt is given back and the interruption counted"
    );
    let now = redis.server_time().await;
    assert!(delayed[0].1 <= now, "the job is due at once");

    // With --tries 1 the next worker runs it as its first attempt, not as one too many.
    let next = start_worker(redis.url(), &["--tries", "1"]);
    let running = next
        .wait_for_event(LONG, "the next worker runs the interrupted job", |e| {
            e.uuid == long.to_string() && e.status == "RUNNING"
        })
        .await;
    assert_eq!(running.attempt, 1);
    assert!(queue.failed_job(&long.to_string()).await.unwrap().is_none());
    next.signal("KILL");
}

#[tokio::test]
async fn a_handler_that_sees_its_worker_stopping_is_put_back_without_waiting_for_the_grace() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    queue.set_events("default", Some(1000)).await.unwrap();
    let uuid = StopAware { ms: 60_000 }.dispatch().sent_via(&queue).await;
    let mut worker = start_worker(redis.url(), &["--grace", "60", "--tries", "1"]);
    worker
        .wait_for_event(LONG, "the job runs", |e| {
            e.uuid == uuid.to_string() && e.status == "RUNNING"
        })
        .await;
    let stopped_at = std::time::Instant::now();
    worker.signal("TERM");
    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(0));
    let took = stopped_at.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "the worker stopped in {took:?}, not after its 60 s grace"
    );
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == uuid.to_string() && e.status == "INTERRUPTED"));
    let mut conn = redis.conn().await;
    let delayed: Vec<String> = conn.zrange("queues:default:delayed", 0, -1).await.unwrap();
    assert_eq!(delayed.len(), 1);
    let payload = Payload::from_json(&delayed[0]).unwrap();
    assert_eq!((payload.attempts, payload.interruptions), (0, 1));
    let entries: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
        .arg("queues:default:events")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    let events: Vec<&str> = entries
        .iter()
        .filter(|(_, fields)| fields.get("uuid") == Some(&uuid.to_string()))
        .filter_map(|(_, fields)| fields.get("event").map(String::as_str))
        .collect();
    assert_eq!(events, ["queued", "active", "interrupted"], "{entries:?}");
}

#[tokio::test]
async fn a_job_interrupted_more_often_than_max_interruptions_fails_saying_so() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Sleep { ms: 60_000 }.dispatch().sent_via(&queue).await;
    let args = ["--grace", "0.2", "--tries", "1", "--max-interruptions", "1"];
    for round in 1..=2 {
        let mut worker = start_worker(redis.url(), &args);
        worker
            .wait_for_event(LONG, "the job runs", |e| {
                e.uuid == uuid.to_string() && e.status == "RUNNING"
            })
            .await;
        worker.signal("TERM");
        assert_eq!(
            worker.wait_exit(LONG).await.code(),
            Some(0),
            "round {round}"
        );
    }
    let record = queue.failed_job(&uuid.to_string()).await.unwrap().unwrap();
    assert_eq!(
        record.exception,
        "sleep was interrupted by a stopping worker 2 times (--max-interruptions 1)."
    );
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn once_and_max_jobs_stop_after_that_many_jobs() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    for _ in 0..10 {
        Noop {}.dispatch().sent_via(&queue).await;
    }
    let mut once = start_worker(redis.url(), &["--once"]);
    assert!(once.wait_exit(LONG).await.success());
    assert_eq!(queue.size("default").await.unwrap().ready, 9);

    let mut four = start_worker(redis.url(), &["--max-jobs", "4", "--concurrency", "3"]);
    assert!(four.wait_exit(LONG).await.success());
    let done = four.done().len();
    assert_eq!(done, 4);
    assert_eq!(queue.size("default").await.unwrap().ready, 5);
}

#[tokio::test]
async fn a_timeout_fails_the_job_on_its_last_attempt() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Sleep { ms: 30_000 }
        .dispatch()
        .timeout(1)
        .sent_via(&queue)
        .await;
    run_until_empty(redis.url(), &[]).await;
    let record = queue.failed_job(&uuid.to_string()).await.unwrap().unwrap();
    assert_eq!(record.exception, "sleep has timed out.");
}

#[tokio::test]
async fn the_memory_limit_exits_with_status_12() {
    let redis = TestRedis::start();
    let mut worker = start_worker(redis.url(), &["--memory", "1"]);
    assert_eq!(worker.wait_exit(LONG).await.code(), Some(12));
}

#[tokio::test]
async fn an_idle_worker_wakes_for_pushed_and_due_delayed_jobs_promptly() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // --sleep 30: only the notify wake-up and the due-time timer can start these jobs quickly.
    let worker = start_worker(redis.url(), &["--sleep", "30"]);
    worker.wait_started().await;
    let mut conn = redis.conn().await;
    tests::wait_for_idle_worker(&conn, LONG).await;

    let pushed_at = now_ms();
    Record { due_ms: pushed_at }
        .dispatch()
        .sent_via(&queue)
        .await;
    let delay = Duration::from_millis(1500);
    let due_ms = now_ms() + delay.as_millis() as u64;
    Record { due_ms }
        .dispatch()
        .delay(delay)
        .sent_via(&queue)
        .await;

    wait_until(LONG, "both record jobs ran", || {
        let mut conn = conn.clone();
        async move { conn.llen::<_, u64>(RECORDS_KEY).await.unwrap() == 2 }
    })
    .await;
    let records: Vec<String> = conn.lrange(RECORDS_KEY, 0, -1).await.unwrap();
    for record in records {
        let record: serde_json::Value = serde_json::from_str(&record).unwrap();
        let late = record["started_ms"].as_i64().unwrap() - record["due_ms"].as_i64().unwrap();
        assert!(
            (0..500).contains(&late),
            "a job started {late} ms after its due time (expected 0 to 500 ms)"
        );
    }
}

/// Runs eight jobs of 1 s with a worker given `args` besides `--concurrency 8`; returns the
/// ms from the first start to the last end.
async fn eight_sleeps_ms(args: &[&str]) -> f64 {
    let redis = TestRedis::start();
    let queue = redis.queue();
    for _ in 0..8 {
        Sleep { ms: 1000 }.dispatch().sent_via(&queue).await;
    }
    let args = [&["--concurrency", "8"], args].concat();
    let worker = run_until_empty(redis.url(), &args).await;
    let events = worker.events();
    let first_start = events
        .iter()
        .filter(|e| e.status == "RUNNING")
        .map(|e| e.at_ms)
        .fold(f64::MAX, f64::min);
    let last_done = events
        .iter()
        .filter(|e| e.status == "DONE")
        .map(|e| e.at_ms)
        .fold(0.0, f64::max);
    assert_eq!(events.iter().filter(|e| e.status == "DONE").count(), 8);
    last_done - first_start
}

#[tokio::test]
async fn jobs_run_concurrently_up_to_the_concurrency() {
    let took = eight_sleeps_ms(&[]).await;
    // One after another would take 8 s; together they take about 1 s.
    assert!(
        took < 4000.0,
        "8 jobs of 1 s took {took} ms with concurrency 8"
    );
}

#[tokio::test]
async fn jobs_that_await_run_concurrently_on_one_thread() {
    let took = eight_sleeps_ms(&["--threads", "1"]).await;
    assert!(took < 4000.0, "8 jobs of 1 s took {took} ms on one thread");
}

#[tokio::test]
async fn a_second_signal_exits_at_once_and_the_job_comes_back_after_retry_after() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Sleep { ms: 60_000 }.dispatch().sent_via(&queue).await;
    let mut worker = start_worker(redis.url(), &["--retry-after", "1", "--tries", "3"]);
    worker
        .wait_for_event(LONG, "the job is running", |e| e.status == "RUNNING")
        .await;
    worker.signal("TERM");
    worker.signal("INT");
    assert_eq!(worker.wait_exit(LONG).await.code(), Some(130));

    // Still reserved: nobody settled it. After retry_after another worker runs it again.
    let mut conn = redis.conn().await;
    let reserved: Vec<String> = conn.zrange("queues:default:reserved", 0, -1).await.unwrap();
    assert_eq!(reserved.len(), 1);
    let second = start_worker(redis.url(), &["--retry-after", "90", "--tries", "3"]);
    let running = second
        .wait_for_event(LONG, "the job runs again", |e| {
            e.uuid == uuid.to_string() && e.status == "RUNNING"
        })
        .await;
    assert_eq!(running.attempt, 2);
}

#[tokio::test]
async fn max_time_stops_an_idle_worker_on_time() {
    let redis = TestRedis::start();
    let started = std::time::Instant::now();
    // --sleep 30: the worker must not wait out its idle sleep past --max-time.
    let mut worker = start_worker(redis.url(), &["--max-time", "1", "--sleep", "30"]);
    assert!(worker.wait_exit(LONG).await.success());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "--max-time 1 stopped the worker after {took:?}"
    );
}

#[tokio::test]
async fn once_lets_its_job_finish_even_without_a_timeout() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Sleep { ms: 500 }.dispatch().sent_via(&queue).await;
    let mut worker = start_worker(redis.url(), &["--once", "--timeout", "0"]);
    assert!(worker.wait_exit(LONG).await.success());
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == uuid.to_string() && e.status == "DONE"));
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn attempts_written_with_spaces_are_still_counted() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let envelope = Flaky { fail_times: 5 }.dispatch().envelope().unwrap();
    let spaced = envelope
        .payload
        .replace(r#""attempts":0"#, r#""attempts" : 0"#);
    assert_ne!(spaced, envelope.payload);
    let mut conn = redis.conn().await;
    let _: () = conn.rpush("queues:default", spaced).await.unwrap();
    // With --tries 2 the job must fail on its second attempt, not retry forever.
    run_until_empty(redis.url(), &["--tries", "2"]).await;
    let record = queue
        .failed_job(&envelope.uuid.to_string())
        .await
        .unwrap()
        .expect("the job failed after its tries");
    assert!(
        record.exception.contains("attempt 2"),
        "{}",
        record.exception
    );
    assert!(
        record.payload.contains(r#""attempts" : 1"#),
        "{}",
        record.payload
    );
}

#[tokio::test]
async fn a_job_running_longer_than_retry_after_is_never_handed_to_a_second_worker() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Sleep { ms: 3500 }.dispatch().sent_via(&queue).await;
    let first = start_worker(redis.url(), &["--retry-after", "1", "--tries", "3"]);
    first
        .wait_for_event(LONG, "the first worker runs the job", |e| {
            e.uuid == uuid.to_string() && e.status == "RUNNING"
        })
        .await;
    // Without heartbeats this worker would take the job over once its reservation expired.
    let second = start_worker(redis.url(), &["--retry-after", "1", "--tries", "3"]);
    second.wait_started().await;
    let done = first
        .wait_for_event(LONG, "the first worker finished the job", |e| {
            e.uuid == uuid.to_string() && e.status == "DONE"
        })
        .await;
    assert_eq!(done.attempt, 1);
    wait_until(LONG, "the queue is empty", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;
    let runs_elsewhere: Vec<_> = second
        .events()
        .into_iter()
        .filter(|e| e.uuid == uuid.to_string())
        .collect();
    assert!(
        runs_elsewhere.is_empty(),
        "the second worker ran it: {runs_elsewhere:?}"
    );
}

#[tokio::test]
async fn the_worker_warns_when_redis_may_evict_queue_keys() {
    let redis = TestRedis::start();
    let mut conn = redis.conn().await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query_async(&mut conn)
        .await
        .unwrap();
    let warned = start_worker(redis.url(), &["--max-time", "1"]);
    wait_until(LONG, "the worker warned about maxmemory-policy", || {
        let lines = warned.lines();
        async move {
            lines.iter().any(|l| {
                l.contains("set maxmemory-policy to noeviction") && l.contains("allkeys-lru")
            })
        }
    })
    .await;

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut quiet = start_worker(redis.url(), &["--max-time", "1"]);
    assert!(quiet.wait_exit(LONG).await.success());
    assert!(
        !quiet.lines().iter().any(|l| l.contains("maxmemory-policy")),
        "{:#?}",
        quiet.lines()
    );
}

#[tokio::test]
async fn the_worker_warns_when_timeout_is_not_below_retry_after() {
    let redis = TestRedis::start();
    let warning = "--timeout should be well below --retry-after";
    let mut risky = start_worker(
        redis.url(),
        &["--timeout", "10", "--retry-after", "5", "--max-time", "1"],
    );
    assert!(risky.wait_exit(LONG).await.success());
    assert!(
        risky.lines().iter().any(|l| l.contains(warning)),
        "{:#?}",
        risky.lines()
    );

    let mut safe = start_worker(
        redis.url(),
        &["--timeout", "2", "--retry-after", "5", "--max-time", "1"],
    );
    assert!(safe.wait_exit(LONG).await.success());
    assert!(
        !safe.lines().iter().any(|l| l.contains(warning)),
        "{:#?}",
        safe.lines()
    );
}

#[tokio::test]
async fn random_bytes_in_a_queue_end_in_the_failed_store_and_the_worker_goes_on() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut pushed = std::collections::HashSet::new();
    while pushed.len() < 300 {
        let len = 1 + (random() % 300) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| random() as u8).collect();
        pushed.insert(bytes);
    }
    let invalid_utf8 = pushed
        .iter()
        .filter(|b| std::str::from_utf8(b).is_err())
        .count();
    assert!(
        invalid_utf8 > 250,
        "the sample holds payloads that are not UTF-8"
    );
    for bytes in &pushed {
        let _: () = conn.rpush("queues:default", bytes).await.unwrap();
    }
    let noop = Noop {}.dispatch().sent_via(&queue).await;

    let worker = run_until_empty(redis.url(), &["--concurrency", "20"]).await;
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == noop.to_string() && e.status == "DONE"));
    let records = failed_records(&redis).await;
    assert_eq!(
        records.len(),
        pushed.len(),
        "one failed record per random payload"
    );
    let not_utf8 = records
        .iter()
        .filter(|r| r["exception"] == "malformed payload: not valid UTF-8")
        .count();
    assert_eq!(not_utf8, invalid_utf8);
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
    println!(
        "random payloads: {} pushed, {} not UTF-8, {} failed with a reason, 0 lost",
        pushed.len(),
        invalid_utf8,
        records.len()
    );
}

/// The ready and reserved jobs of `default`.
async fn ready_and_reserved(queue: &RedisQueue) -> (u64, u64) {
    let size = queue.size("default").await.unwrap();
    (size.ready, size.reserved)
}

/// Pushes `before` no-op jobs, one that sleeps `ms`, then `after` no-op jobs, in that order;
/// returns the sleeping job's uuid.
async fn noops_around_a_sleep(
    queue: &RedisQueue,
    before: usize,
    ms: u64,
    after: usize,
) -> uuid::Uuid {
    let mut bulk = Bulk::via(queue);
    for _ in 0..before {
        bulk.add(Noop {}.dispatch()).unwrap();
    }
    bulk.add(Sleep { ms }.dispatch()).unwrap();
    for _ in 0..after {
        bulk.add(Noop {}.dispatch()).unwrap();
    }
    bulk.send().await.unwrap()[before].uuid()
}

/// Pushes [`noops_around_a_sleep`]'s jobs, starts a worker of one slot with `args` besides,
/// and returns it, with the sleeping job's uuid, once that job runs.
async fn one_slot_at_the_sleep(
    redis: &TestRedis,
    (before, ms, after): (usize, u64, usize),
    args: &[&str],
) -> (WorkerProcess, String) {
    let sleep = noops_around_a_sleep(&redis.queue(), before, ms, after)
        .await
        .to_string();
    let worker = start_worker(redis.url(), &[&["--concurrency", "1"], args].concat());
    worker
        .wait_for_event(LONG, "the sleeping job runs", |e| {
            e.uuid == sleep && e.status == "RUNNING"
        })
        .await;
    (worker, sleep)
}

/// The window of work reserved ahead in the tests that count the jobs waiting ahead: wide
/// enough that no-op jobs are short against it on any host (a debug build on a loaded machine
/// takes a millisecond or two a job, which the default 2 ms would make one round or two), so
/// that the three rounds are the bound.
const AHEAD_WINDOW_MS: &str = "50";

#[tokio::test]
async fn after_short_jobs_three_rounds_of_the_slots_are_reserved_ahead() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let (mut worker, _) = one_slot_at_the_sleep(
        &redis,
        (20, 2500, 20),
        &["--stop-when-empty", "--reserve-ahead-ms", AHEAD_WINDOW_MS],
    )
    .await;
    // While it runs in the only slot: it and three jobs reserved ahead (the first 20 jobs
    // proved short), the other 17 still queued.
    wait_until(
        Duration::from_millis(1000),
        "three jobs reserved ahead of the busy slot",
        || async { ready_and_reserved(&queue).await == (17, 4) },
    )
    .await;
    // The worker's record counts the running job alone, not those waiting for its slot.
    let admin = Admin::new(queue.clone());
    wait_until(
        Duration::from_millis(1500),
        "the heartbeat counts one running job",
        || async {
            let workers = admin.workers().await.unwrap();
            workers.iter().any(|w| w.running == 1 && w.processed == 20)
        },
    )
    .await;
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    let events = worker.events();
    assert_eq!(events.iter().filter(|e| e.status == "DONE").count(), 41);
    assert!(
        events.iter().all(|e| e.attempt == 1),
        "a job reserved ahead ran on its first attempt"
    );
}

#[tokio::test]
async fn a_worker_told_to_reserve_nothing_ahead_holds_only_its_running_jobs() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let (mut worker, _) = one_slot_at_the_sleep(
        &redis,
        (20, 3000, 20),
        &["--stop-when-empty", "--reserve-ahead-ms", "0"],
    )
    .await;
    // Read during the first second of the sleeping job's three, well before it ends: with any
    // window, the short jobs before it would have had jobs reserved ahead of the slot by now.
    let reading = std::time::Instant::now();
    while reading.elapsed() < Duration::from_secs(1) {
        assert_eq!(
            ready_and_reserved(&queue).await,
            (20, 1),
            "only the running job is reserved"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    assert_eq!(worker.done().len(), 41);
}

#[tokio::test]
async fn no_job_is_reserved_ahead_of_a_slot_while_jobs_are_long() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut sleeps = Vec::new();
    for _ in 0..4 {
        sleeps.push(
            Sleep { ms: 600 }
                .dispatch()
                .sent_via(&queue)
                .await
                .to_string(),
        );
    }
    let mut worker = start_worker(redis.url(), &["--concurrency", "1", "--stop-when-empty"]);
    // Before any job ended, and once jobs proved long: nothing is ever reserved beside the
    // running job, read over the whole run. A finished job's reservation is deleted by the
    // acker a moment after its end is logged, so the jobs logged done before the read are not
    // counted (the reservations are read first: a job reserved ahead cannot end meanwhile).
    let mut conn = redis.conn().await;
    while worker.is_running() {
        let reserved: Vec<String> = conn.zrange("queues:default:reserved", 0, -1).await.unwrap();
        let done: Vec<String> = worker.done().into_iter().map(|e| e.uuid).collect();
        let unfinished: Vec<String> = reserved
            .iter()
            .map(|raw| Payload::from_json(raw).unwrap().uuid.to_string())
            .filter(|uuid| !done.contains(uuid))
            .collect();
        assert!(
            unfinished.len() <= 1,
            "{unfinished:?} reserved and unfinished with one slot"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    let done: Vec<String> = worker.done().into_iter().map(|e| e.uuid).collect();
    assert_eq!(done, sleeps, "every job ran, in order");
}

#[tokio::test]
async fn jobs_that_wait_go_on_in_their_slot_in_the_order_they_were_reserved() {
    // Each job awaits a write to Redis, so a slot's task goes on with the next job reserved
    // ahead (three, once the first jobs proved short).
    let redis = TestRedis::start();
    let queue = redis.queue();
    let sent = sent_in_bulk(&queue, (0..200).map(|_| Record { due_ms: 0 }.dispatch())).await;
    let mut worker = start_worker(redis.url(), &["--concurrency", "1", "--stop-when-empty"]);
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    let events = worker.events();
    let done: Vec<String> = events
        .iter()
        .filter(|e| e.status == "DONE")
        .map(|e| e.uuid.clone())
        .collect();
    let started: Vec<String> = runs_in_order(&mut redis.conn().await)
        .await
        .into_iter()
        .map(|(uuid, _)| uuid)
        .collect();
    // The starts first: they tell a job run out of order from a log line written out of order.
    assert_eq!(started, sent, "each job started once, in order");
    assert_eq!(done, sent, "every job ran once, in order");
    assert!(events.iter().all(|e| e.attempt == 1));
    assert_eq!(ready_and_reserved(&queue).await, (0, 0));
}

#[tokio::test]
async fn jobs_reserved_ahead_go_back_unstarted_with_their_attempt_not_counted_when_interrupted() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let (mut worker, sleep) = one_slot_at_the_sleep(
        &redis,
        (10, 60_000, 10),
        &["--grace", "1", "--reserve-ahead-ms", AHEAD_WINDOW_MS],
    )
    .await;
    wait_until(LONG, "three jobs reserved ahead", || async {
        ready_and_reserved(&queue).await == (7, 4)
    })
    .await;
    worker.signal("TERM");
    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(0));

    let events = worker.events();
    assert_eq!(events.iter().filter(|e| e.status == "DONE").count(), 10);
    assert_eq!(
        ready_and_reserved(&queue).await,
        (7, 0),
        "nothing is left reserved"
    );
    let mut conn = redis.conn().await;
    let delayed: Vec<String> = conn.zrange("queues:default:delayed", 0, -1).await.unwrap();
    let mut counters: Vec<(bool, u32, u32)> = delayed
        .iter()
        .map(|raw| {
            let payload = Payload::from_json(raw).unwrap();
            let is_sleep = payload.uuid.to_string() == sleep;
            (is_sleep, payload.attempts, payload.interruptions)
        })
        .collect();
    counters.sort();
    assert_eq!(
        counters,
        [(false, 0, 0), (false, 0, 0), (false, 0, 0), (true, 0, 1)],
        "no attempt is counted: the interrupted job's is given back with its interruption \
         counted, and those that waited ahead went back unstarted"
    );
}
