//! Laravel's remaining attempt rules, on a worker process: `maxExceptions` counts failed
//! attempts apart from tries, and `retryUntil` replaces tries with a deadline.

use examples::Flaky;
use jobs_core::{Job, Payload};
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_for, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

#[tokio::test]
async fn a_job_fails_on_its_max_exceptionsth_failed_attempt_whatever_its_tries() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Flaky { fail_times: 10 }
        .dispatch()
        .tries(0)
        .max_exceptions(3)
        .sent_via(&queue)
        .await;
    let worker = start_worker(redis.url(), &["--backoff", "0"]);
    let record = wait_for(LONG, "the job failed", || async {
        queue.failed_job(&uuid.to_string()).await.unwrap()
    })
    .await;
    assert!(
        record.exception.contains("attempt 3 of"),
        "{}",
        record.exception
    );
    let payload = Payload::from_json(&record.payload).unwrap();
    assert_eq!(
        payload.exceptions, 2,
        "two failed attempts before the last one"
    );
    let attempts: Vec<u64> = worker
        .events()
        .iter()
        .filter(|e| e.status == "RELEASED" || e.status == "FAILED")
        .map(|e| e.attempt)
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
}

#[tokio::test]
async fn retry_until_retries_past_the_tries_until_its_time_and_then_fails() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let until = chrono::Utc::now() + chrono::Duration::seconds(3);
    let uuid = Flaky { fail_times: 1_000 }
        .dispatch()
        .tries(1)
        .retry_until(until)
        .sent_via(&queue)
        .await;
    let worker = start_worker(redis.url(), &["--backoff", "1"]);
    let record = wait_for(LONG, "the job failed", || async {
        queue.failed_job(&uuid.to_string()).await.unwrap()
    })
    .await;
    let failed_at = chrono::Utc::now();
    let runs = worker
        .events()
        .iter()
        .filter(|e| e.status == "RELEASED")
        .count();
    assert!(runs >= 2, "retried past its single try: {runs} releases");
    assert!(failed_at >= until, "failed before its time");
    assert!(
        record.exception.contains("flaky job failing"),
        "{}",
        record.exception
    );
}
