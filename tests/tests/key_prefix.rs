//! A key prefix, as a stock Laravel app puts before every Redis key
//! (`laravel_database_queues:default`): dispatch, the worker (`--prefix` or `REDIS_PREFIX`) and
//! `jobsctl --prefix` all use it, for the queues, the failed-job store and the operators' keys,
//! and touch no unprefixed key.

use examples::{Noop, Panic};
use redis::AsyncCommands;
use redjob::QueueConfig;
use std::time::Duration;
use tests::jobs_command::JobsCommand;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(30);
const PREFIX: &str = "laravel_database_";

async fn keys(redis: &TestRedis) -> Vec<String> {
    let mut keys: Vec<String> = redis.conn().await.keys("*").await.unwrap();
    // The example jobs' own records for the tests (a failed() hook's, say) are not the
    // queues' keys.
    keys.retain(|key| !key.starts_with("examples:"));
    keys.sort();
    keys
}

#[tokio::test]
async fn dispatch_workers_and_jobsctl_share_prefixed_keys_only() {
    let redis = TestRedis::start();
    let queue = redis.queue_with(QueueConfig {
        prefix: PREFIX.to_owned(),
        ..redis.config()
    });
    let done = Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
    let failed = Panic {}.dispatch().on_queue("q").sent_via(&queue).await;
    Noop {}
        .dispatch()
        .on_queue("q")
        .delay(600)
        .sent_via(&queue)
        .await;
    assert_eq!(
        keys(&redis).await,
        [
            "laravel_database_queues:q",
            "laravel_database_queues:q:delayed",
            "laravel_database_queues:q:notify"
        ]
    );

    // The worker takes its prefix from --prefix here, from REDIS_PREFIX below.
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "q", "--prefix", PREFIX, "--stop-when-empty"],
    );
    assert!(worker.wait_exit(LONG).await.success());
    let events = worker.events();
    assert!(
        events
            .iter()
            .any(|e| e.uuid == done.to_string() && e.status == "DONE"),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.uuid == failed.to_string() && e.status == "FAILED"),
        "{events:#?}"
    );
    let record = queue.failed_job(&failed.to_string()).await.unwrap();
    assert!(record.is_some(), "the failed job is in the prefixed store");
    assert!(keys(&redis).await.iter().all(|key| key.starts_with(PREFIX)));

    let jobsctl = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let listed = jobsctl.json(&["--prefix", PREFIX, "failed"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["record"]["uuid"], failed.to_string().as_str());
    let unprefixed = jobsctl.json(&["failed"]);
    assert_eq!(unprefixed.as_array().unwrap().len(), 0, "{unprefixed}");
    let sizes = jobsctl.json(&["--prefix", PREFIX, "size"]);
    assert_eq!(sizes[0]["name"], "q", "{sizes}");
    assert_eq!(sizes[0]["delayed"], 1, "{sizes}");
    let paused = jobsctl.run(&["--prefix", PREFIX, "pause", "q"]);
    assert_eq!(paused.code(), Some(0), "{}", paused.stderr);
    let members: Vec<String> = redis
        .conn()
        .await
        .smembers(format!("{PREFIX}jobs:paused"))
        .await
        .unwrap();
    assert_eq!(members, ["q"]);
    let retried = jobsctl.run(&["--prefix", PREFIX, "retry", "all"]);
    assert_eq!(retried.code(), Some(0), "{}", retried.stderr);
    assert_eq!(queue.size("q").await.unwrap().ready, 1);

    // A live worker's record and metrics are prefixed too, and it honours the prefixed pause.
    let live = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "q"],
        &[("REDIS_PREFIX", PREFIX)],
    );
    wait_until(LONG, "the worker is listed", || async {
        let listed = jobsctl.json(&["--prefix", PREFIX, "workers"]);
        listed.as_array().unwrap().len() == 1
    })
    .await;
    assert_eq!(queue.size("q").await.unwrap().ready, 1, "q is paused");
    let resumed = jobsctl.run(&["--prefix", PREFIX, "resume", "q"]);
    assert_eq!(resumed.code(), Some(0), "{}", resumed.stderr);
    wait_until(LONG, "the retried job ran", || async {
        queue.size("q").await.unwrap().ready == 0
    })
    .await;
    drop(live);
    assert!(
        keys(&redis).await.iter().all(|key| key.starts_with(PREFIX)),
        "{:?}",
        keys(&redis).await
    );
}
