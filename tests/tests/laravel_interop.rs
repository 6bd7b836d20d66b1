//! A real Laravel app's queue code (Laravel 8.83 from Debian's php-laravel-framework, run by
//! tests/laravel/*.php) and our workers on the same Redis: what Laravel pushes, with or without
//! its default key prefix, runs on a Rust worker on its first attempt, the delayed job not
//! before its due time, and nothing is left behind.

use examples::RECORDS_KEY;
use redis::AsyncCommands;
use std::process::Command;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_for, TestRedis};

const LONG: Duration = Duration::from_secs(30);

/// Runs `tests/laravel/<script>` with `args` and returns what it printed.
fn laravel(script: &str, args: &[&str]) -> String {
    let path = format!("{}/laravel/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("php").arg(&path).args(args).output().expect(
        "cannot run php: scripts/test installs php-cli, php-redis and php-laravel-framework",
    );
    assert!(
        output.status.success(),
        "{path} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn jobs_laravel_pushes_run_on_a_rust_worker_with_and_without_its_key_prefix() {
    for prefix in ["", "laravel_database_"] {
        let redis = TestRedis::start();
        let port = redis.port().to_string();
        let pushed = laravel("push.php", &[&port, prefix, "emails"]);
        let due: Vec<(String, u64)> = pushed
            .lines()
            .map(|line| {
                let (kind, due) = line.split_once(' ').unwrap();
                (kind.to_owned(), due.parse().unwrap())
            })
            .collect();
        assert_eq!(due.len(), 3, "{pushed}");

        let mut worker = WorkerProcess::start(
            env!("CARGO_BIN_EXE_test_worker"),
            redis.url(),
            &["--queue", "emails", "--prefix", prefix],
        );
        let mut conn = redis.conn().await;
        let records: Vec<String> = wait_for(LONG, "both record jobs ran", || {
            let mut conn = conn.clone();
            async move {
                let records: Vec<String> = conn.lrange(RECORDS_KEY, 0, -1).await.unwrap();
                (records.len() == 2).then_some(records)
            }
        })
        .await;
        worker.signal("TERM");
        assert!(worker.wait_exit(LONG).await.success());

        for record in &records {
            let record: serde_json::Value = serde_json::from_str(record).unwrap();
            assert_eq!(record["attempt"], 1, "prefix {prefix:?}: {record}");
            let due_ms = record["due_ms"].as_u64().unwrap();
            let started_ms = record["started_ms"].as_u64().unwrap();
            assert!(
                due.iter().any(|(_, due)| *due == due_ms),
                "prefix {prefix:?}: {record} carries a due time Laravel gave"
            );
            assert!(
                started_ms + 5 >= due_ms,
                "prefix {prefix:?}: ran early: {record}"
            );
            assert!(
                started_ms < due_ms + 1_500,
                "prefix {prefix:?}: ran late: {record}"
            );
        }
        let events = worker.events();
        let noop_done = events
            .iter()
            .filter(|e| e.job == "noop" && e.status == "DONE" && e.attempt == 1)
            .count();
        assert_eq!(noop_done, 1, "prefix {prefix:?}: {events:#?}");
        assert!(
            !events
                .iter()
                .any(|e| e.status == "FAILED" || e.status == "RELEASED"),
            "prefix {prefix:?}: {events:#?}"
        );
        let left: Vec<String> = conn.keys(format!("{prefix}queues:*")).await.unwrap();
        let left: Vec<&String> = left.iter().filter(|k| !k.ends_with(":notify")).collect();
        assert!(left.is_empty(), "prefix {prefix:?}: left behind: {left:?}");
    }
}
