//! The watchdog, end to end: a handler that blocks its thread past its timeout gets the
//! timeout rules and the worker process ends with status 1, losing no job; an async handler
//! that runs past its timeout is stopped by the timeout alone.

use examples::{Block, Noop, Sleep};
use redis::AsyncCommands;
use redjob::Payload;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::SentVia;
use tests::TestRedis;

const LONG: Duration = Duration::from_secs(30);

/// The exit status of a worker ended by the watchdog.
const WATCHDOG_EXIT: i32 = redjob_worker::WATCHDOG_EXIT_CODE as i32;

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// A log line's time, in ms since the epoch.
fn at_ms(line: &serde_json::Value) -> f64 {
    let text = line["timestamp"].as_str().expect("a timestamp");
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("an RFC 3339 timestamp")
        .timestamp_micros() as f64
        / 1000.0
}

/// Waits until `worker` has exited by its watchdog, checking it logged why and naming the job
/// `uuid`; returns the ms from that job's RUNNING line to the watchdog's last line.
async fn wait_ended_by_watchdog(worker: &mut WorkerProcess, uuid: &str) -> f64 {
    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(WATCHDOG_EXIT), "exit status: {status}");
    let running = worker
        .events()
        .into_iter()
        .find(|e| e.uuid == uuid && e.status == "RUNNING")
        .expect("the blocking job ran");
    let blamed = worker.json_lines_with("a timeout cannot interrupt");
    assert_eq!(blamed.len(), 1, "{blamed:?}");
    assert_eq!(blamed[0]["level"], "ERROR");
    assert_eq!(blamed[0]["span"]["uuid"], uuid, "the line names the job");
    let ended = worker.json_lines_with("worker ended");
    assert_eq!(ended.len(), 1, "{:?}", worker.lines());
    assert_eq!(ended[0]["exit_code"], WATCHDOG_EXIT);
    at_ms(&ended[0]) - running.at_ms
}

#[tokio::test]
async fn a_blocking_handler_on_its_last_attempt_fails_as_timed_out_and_the_worker_exits_1() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let noop = Noop {}.dispatch().sent_via(&queue).await;
    let sleep = Sleep { ms: 60_000 }
        .dispatch()
        .tries(3)
        .sent_via(&queue)
        .await;
    let block = Block { ms: 60_000 }
        .dispatch()
        .timeout(1)
        .sent_via(&queue)
        .await;
    let mut worker = start_worker(redis.url(), &["--concurrency", "3", "--retry-after", "60"]);
    let elapsed_ms = wait_ended_by_watchdog(&mut worker, &block.to_string()).await;
    // The timeout (1 s) plus the watchdog's margin (1 s) must have passed; then the worker
    // ends promptly.
    assert!(
        (1900.0..8000.0).contains(&elapsed_ms),
        "the worker ended {elapsed_ms} ms after the job started"
    );

    // The blocking job: failed, with the payload as it was pushed.
    let record = queue.failed_job(&block.to_string()).await.unwrap().unwrap();
    assert_eq!(record.exception, "block has timed out.");
    assert_eq!(Payload::from_json(&record.payload).unwrap().attempts, 0);
    let failed = worker
        .events()
        .into_iter()
        .find(|e| e.uuid == block.to_string() && e.status == "FAILED")
        .expect("a FAILED line for the blocking job");
    assert_eq!(failed.reason.as_deref(), Some("block has timed out."));

    // The other jobs: the finished one acknowledged, the running one back on its queue at once.
    let events = worker.events();
    assert!(events
        .iter()
        .any(|e| e.uuid == noop.to_string() && e.status == "DONE"));
    let interrupted = events
        .iter()
        .find(|e| e.uuid == sleep.to_string() && e.status == "INTERRUPTED")
        .expect("the running async job was put back");
    assert!(
        interrupted
            .reason
            .as_deref()
            .unwrap()
            .contains("interrupted"),
        "{interrupted:?}"
    );
    let mut conn = redis.conn().await;
    let reserved: u64 = conn.zcard("queues:default:reserved").await.unwrap();
    assert_eq!(reserved, 0, "nothing is left reserved");
    let delayed: Vec<(String, f64)> = conn
        .zrange_withscores("queues:default:delayed", 0, -1)
        .await
        .unwrap();
    assert_eq!(delayed.len(), 1, "{delayed:?}");
    let payload = Payload::from_json(&delayed[0].0).unwrap();
    assert_eq!(
        (payload.uuid, payload.attempts, payload.interruptions),
        (sleep, 0, 1),
        "its attempt given back: it did nothing wrong"
    );
    assert!(delayed[0].1 <= redis.server_time().await, "due at once");
    let size = queue.size("default").await.unwrap();
    let failed_count: u64 = conn.hlen("failed_jobs").await.unwrap();
    println!(
        "jobs 3: done 1, put back 1, failed 1 (timed out); still queued {}, failed {failed_count}, \
         lost 0; the worker ended {elapsed_ms:.0} ms after the blocking job started",
        size.total()
    );
    assert_eq!((size.total(), failed_count), (1, 1));
}

#[tokio::test]
async fn a_blocking_handler_with_tries_left_comes_back_after_retry_after_and_runs_again() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let block = Block { ms: 60_000 }
        .dispatch()
        .timeout(1)
        .tries(2)
        .sent_via(&queue)
        .await;
    let uuid = block.to_string();
    let args = ["--retry-after", "3"];
    let mut first = start_worker(redis.url(), &args);
    let first_ms = wait_ended_by_watchdog(&mut first, &uuid).await;

    // Not failed: still reserved, its attempt counted, and no longer extended by the
    // heartbeat, so it expires within retry_after.
    assert!(queue.failed_job(&uuid).await.unwrap().is_none());
    assert!(first.json_lines_with("stays reserved").len() == 1);
    let mut conn = redis.conn().await;
    let reserved: Vec<(String, f64)> = conn
        .zrange_withscores("queues:default:reserved", 0, -1)
        .await
        .unwrap();
    assert_eq!(reserved.len(), 1, "{reserved:?}");
    assert_eq!(Payload::from_json(&reserved[0].0).unwrap().attempts, 1);
    let expires_in = reserved[0].1 - redis.server_time().await;
    assert!(
        expires_in <= 3.0,
        "the reservation expires in {expires_in} s"
    );

    // A new worker takes it once its reservation expired: the second and last attempt, which
    // times out as well and fails.
    let mut second = start_worker(redis.url(), &args);
    let second_ms = wait_ended_by_watchdog(&mut second, &uuid).await;
    let rerun = second
        .events()
        .into_iter()
        .find(|e| e.uuid == uuid && e.status == "RUNNING")
        .unwrap();
    assert_eq!(rerun.attempt, 2);
    let record = queue.failed_job(&uuid).await.unwrap().unwrap();
    assert_eq!(record.exception, "block has timed out.");
    assert_eq!(Payload::from_json(&record.payload).unwrap().attempts, 1);
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
    println!(
        "attempt 1 left reserved after {first_ms:.0} ms; attempt 2 failed as timed out after \
         {second_ms:.0} ms; lost 0"
    );
}

#[tokio::test]
async fn a_handler_blocking_the_only_runtime_thread_is_still_failed_and_the_others_come_back() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let sleep = Sleep { ms: 60_000 }
        .dispatch()
        .tries(3)
        .sent_via(&queue)
        .await;
    let block = Block { ms: 60_000 }
        .dispatch()
        .timeout(1)
        .sent_via(&queue)
        .await;
    // One runtime thread: the blocking handler holds the whole runtime, the worker's Redis
    // connection included. The watchdog reaches Redis through a connection of its own.
    let args = ["--concurrency", "2", "--retry-after", "3"];
    let one_thread = [&args[..], &["--threads", "1"]].concat();
    let mut first = start_worker(redis.url(), &one_thread);
    let elapsed_ms = wait_ended_by_watchdog(&mut first, &block.to_string()).await;
    assert!(
        (1900.0..9000.0).contains(&elapsed_ms),
        "the worker ended {elapsed_ms} ms after the job started"
    );
    let record = queue.failed_job(&block.to_string()).await.unwrap().unwrap();
    assert_eq!(record.exception, "block has timed out.");

    // The async job could not be put back by the blocked runtime: it is still reserved and
    // comes back after retry_after with its attempt counted.
    assert!(queue
        .failed_job(&sleep.to_string())
        .await
        .unwrap()
        .is_none());
    let mut conn = redis.conn().await;
    let reserved: Vec<String> = conn.zrange("queues:default:reserved", 0, -1).await.unwrap();
    assert_eq!(reserved.len(), 1, "{reserved:?}");
    assert_eq!(Payload::from_json(&reserved[0]).unwrap().uuid, sleep);
    let second = start_worker(redis.url(), &args);
    let rerun = second
        .wait_for_event(LONG, "the async job runs again", |e| {
            e.uuid == sleep.to_string() && e.status == "RUNNING"
        })
        .await;
    assert_eq!(rerun.attempt, 2);
    println!(
        "one runtime thread: the worker ended {elapsed_ms:.0} ms after the blocking job \
         started; blocking job failed, async job back after retry_after; lost 0"
    );
}

#[tokio::test]
async fn an_async_handler_past_its_timeout_fails_through_the_timeout_and_the_worker_goes_on() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let late = Sleep { ms: 30_000 }
        .dispatch()
        .timeout(1)
        .sent_via(&queue)
        .await;
    // Keeps the worker busy past the late job's timeout plus the watchdog's margin.
    let slow = Sleep { ms: 3_000 }.dispatch().sent_via(&queue).await;
    let mut worker = start_worker(redis.url(), &["--concurrency", "2", "--stop-when-empty"]);
    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(0), "exit status: {status}");

    let record = queue.failed_job(&late.to_string()).await.unwrap().unwrap();
    assert_eq!(record.exception, "sleep has timed out.");
    let events = worker.events();
    let failed = events
        .iter()
        .find(|e| e.uuid == late.to_string() && e.status == "FAILED")
        .unwrap();
    let running = events
        .iter()
        .find(|e| e.uuid == late.to_string() && e.status == "RUNNING")
        .unwrap();
    let after_ms = failed.at_ms - running.at_ms;
    assert!(
        (900.0..1900.0).contains(&after_ms),
        "failed {after_ms} ms after it started"
    );
    let done = events
        .iter()
        .find(|e| e.uuid == slow.to_string() && e.status == "DONE")
        .expect("the other job finished in the same worker");
    assert!(done.at_ms - running.at_ms > 2000.0);
    assert!(worker
        .json_lines_with("a timeout cannot interrupt")
        .is_empty());
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}
