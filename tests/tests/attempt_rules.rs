//! Laravel's remaining attempt rules, on a worker process: `maxExceptions` counts failed
//! attempts apart from tries, `retryUntil` replaces tries with a deadline, and a job's
//! `failed()` hook runs once when it fails for good, whatever the reason.

use examples::{FailSlowly, Flaky, Panic, FAILED_HOOKS_KEY};
use redis::AsyncCommands;
use redjob::Payload;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_for, wait_until, SentVia, TestRedis};

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
    // A whole second, as the payload keeps it (Laravel's `retryUntil` is a Unix timestamp):
    // the job may fail from the start of that second on.
    let until = chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() + 3, 0).unwrap();
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

/// The `failed()` hook calls recorded for `uuid`.
async fn hook_calls(redis: &TestRedis, uuid: &str) -> Vec<serde_json::Value> {
    let entries: Vec<String> = redis
        .conn()
        .await
        .lrange(FAILED_HOOKS_KEY, 0, -1)
        .await
        .unwrap();
    entries
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap())
        .filter(|e| e["uuid"] == uuid)
        .collect()
}

#[tokio::test]
async fn the_failed_hook_runs_once_for_an_error_a_panic_and_too_many_attempts() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let flaky = Flaky { fail_times: 5 }
        .dispatch()
        .tries(2)
        .sent_via(&queue)
        .await;
    let panic = Panic {}.dispatch().tries(1).sent_via(&queue).await;
    // Reserved twice already (two crashed runs, say) with one try: fails before it runs.
    let worn = Flaky { fail_times: 0 }
        .dispatch()
        .tries(1)
        .sent_via(&queue)
        .await;
    let mut conn = redis.conn().await;
    let raw: String = conn.lindex("queues:default", 2).await.unwrap();
    let worn_out = redjob::payload::with_attempts(&raw, 2).unwrap();
    conn.lset::<_, _, ()>("queues:default", 2, worn_out)
        .await
        .unwrap();

    let mut worker = start_worker(redis.url(), &["--backoff", "0", "--stop-when-empty"]);
    assert!(worker.wait_exit(LONG).await.success());
    let flaky_calls = hook_calls(&redis, &flaky.to_string()).await;
    assert_eq!(flaky_calls.len(), 1, "{flaky_calls:?}");
    assert_eq!(flaky_calls[0]["attempt"], 2);
    assert!(flaky_calls[0]["reason"]
        .as_str()
        .unwrap()
        .contains("flaky job failing"));
    let panic_calls = hook_calls(&redis, &panic.to_string()).await;
    assert_eq!(panic_calls.len(), 1, "{panic_calls:?}");
    assert!(panic_calls[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("panicked: "));
    let worn_calls = hook_calls(&redis, &worn.to_string()).await;
    assert_eq!(worn_calls.len(), 1, "{worn_calls:?}");
    assert_eq!(
        worn_calls[0]["reason"],
        "flaky has been attempted too many times."
    );
    assert_eq!(queue.failed_jobs(10).await.unwrap().len(), 3);
    let owed: u64 = redis.conn().await.zcard("failed_jobs:hooks").await.unwrap();
    assert_eq!(owed, 0, "every hook reported done");
}

#[tokio::test]
async fn a_failed_hook_whose_worker_was_killed_is_run_by_another_worker() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = FailSlowly { hook_ms: 3_000 }
        .dispatch()
        .sent_via(&queue)
        .await;
    let args = ["--retry-after", "1"];
    let mut doomed = start_worker(redis.url(), &args);
    let mut conn = redis.conn().await;
    // The failure is recorded and its hook owed in one step; the hook is running.
    wait_until(LONG, "the failure is recorded with its hook owed", || {
        let mut conn = conn.clone();
        async move {
            let owed: Option<f64> = conn
                .zscore("failed_jobs:hooks", uuid.to_string())
                .await
                .unwrap();
            owed.is_some()
        }
    })
    .await;
    doomed.kill();
    assert!(hook_calls(&redis, &uuid.to_string()).await.is_empty());

    let _rescuer = start_worker(redis.url(), &args);
    wait_until(LONG, "another worker ran the hook", || async {
        !hook_calls(&redis, &uuid.to_string()).await.is_empty()
    })
    .await;
    wait_until(LONG, "the hook is reported done", || {
        let mut conn = conn.clone();
        async move { conn.zcard::<_, u64>("failed_jobs:hooks").await.unwrap() == 0 }
    })
    .await;
    let calls = hook_calls(&redis, &uuid.to_string()).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["attempt"], 1);
    assert_eq!(calls[0]["reason"], "failing on purpose");
    let _ = conn.ping::<String>().await;
}
