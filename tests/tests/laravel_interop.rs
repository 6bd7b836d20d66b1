//! A real Laravel app's queue code (Laravel 8.83 from Debian's php-laravel-framework, run by
//! tests/laravel/*.php) and our workers on the same Redis: what Laravel pushes, with or without
//! its default key prefix, runs on a Rust worker on its first attempt, the delayed job not
//! before its due time; what Rust dispatches runs on Laravel's worker; both workers on one
//! queue run each of 1,000 jobs pushed from both sides once; a reservation abandoned on one
//! side is run by the other, as is a job that failed and was released on one side; and a
//! Laravel job class runs on a Rust worker, encrypted ones with the app's key; and a trace and
//! Laravel's Context cross between the sides both ways, as the payload keys `traceparent` and
//! `illuminate:log:context`.

use examples::{SendInvoice, Shared, INVOICES_KEY, RECORDS_KEY, SHARED_KEY};
use redis::AsyncCommands;
use redjob::payload::LogContext;
use redjob::{QueueConfig, RedisQueue};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;
use tests::otlp::{Exporting, OtlpReceiver};
use tests::worker_process::WorkerProcess;
use tests::{wait_for, SentVia, TestRedis};
use tracing::Instrument;

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

/// Without a prefix, and with a stock Laravel app's.
const PREFIXES: [&str; 2] = ["", "laravel_database_"];

/// What [`Shared`] jobs recorded, by side: `(n, attempt)` pairs, sorted. Laravel's side writes
/// through its Redis connection, so under `prefix`.
async fn shared_runs(redis: &TestRedis, prefix: &str) -> BTreeMap<String, Vec<(u64, u64)>> {
    let mut entries = shared_entries(redis, SHARED_KEY).await;
    if !prefix.is_empty() {
        entries.extend(shared_entries(redis, &format!("{prefix}{SHARED_KEY}")).await);
    }
    let mut runs: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for entry in entries {
        runs.entry(entry["side"].as_str().unwrap().to_owned())
            .or_default()
            .push((
                entry["n"].as_u64().unwrap(),
                entry["attempt"].as_u64().unwrap(),
            ));
    }
    runs.values_mut().for_each(|runs| runs.sort());
    runs
}

/// Asserts that `runs` ran each of `numbers` once, on either side.
#[track_caller]
fn assert_each_ran_once(
    runs: &BTreeMap<String, Vec<(u64, u64)>>,
    numbers: std::ops::Range<u64>,
    prefix: &str,
) {
    let mut all: Vec<u64> = runs.values().flatten().map(|(n, _)| *n).collect();
    all.sort();
    assert_eq!(
        all,
        numbers.collect::<Vec<_>>(),
        "{prefix:?}: each job ran exactly once"
    );
}

/// Laravel's worker on `shared` until it has been empty for half a second (at most 60 s).
fn laravel_worker(redis: &TestRedis, prefix: &str, retry_after: &str) -> std::process::Child {
    laravel_worker_on(redis, prefix, "shared", retry_after)
}

/// Laravel's worker on `queue` until it has been empty for half a second (at most 60 s).
fn laravel_worker_on(
    redis: &TestRedis,
    prefix: &str,
    queue: &str,
    retry_after: &str,
) -> std::process::Child {
    let port = redis.port().to_string();
    Command::new("php")
        .arg(format!("{}/laravel/work.php", env!("CARGO_MANIFEST_DIR")))
        .args([port.as_str(), prefix, queue, "60", retry_after])
        .spawn()
        .expect("cannot run php")
}

/// A Rust worker on `shared` with `prefix` and `args`.
fn rust_worker(redis: &TestRedis, prefix: &str, args: &[&str]) -> WorkerProcess {
    let mut all = vec!["--queue", "shared", "--prefix", prefix];
    all.extend_from_slice(args);
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis.url(), &all)
}

/// Dispatches a [`Shared`] job onto `shared` for each of `numbers`.
async fn dispatch_shared(queue: &RedisQueue, numbers: std::ops::Range<u64>) {
    for n in numbers {
        Shared {
            n,
            ms: 0,
            fail_on: None,
        }
        .dispatch()
        .on_queue("shared")
        .sent_via(queue)
        .await;
    }
}

/// A handle that dispatches with `prefix`.
fn prefixed_queue(redis: &TestRedis, prefix: &str) -> RedisQueue {
    redis.queue_with(QueueConfig {
        prefix: prefix.to_owned(),
        ..redis.config()
    })
}

#[tokio::test]
async fn jobs_rust_dispatches_run_on_laravels_worker() {
    for prefix in PREFIXES {
        let redis = TestRedis::start();
        let queue = prefixed_queue(&redis, prefix);
        dispatch_shared(&queue, 0..20).await;
        let status = laravel_worker(&redis, prefix, "90").wait().unwrap();
        assert!(status.success());
        let runs = shared_runs(&redis, prefix).await;
        let expected: Vec<(u64, u64)> = (0..20).map(|n| (n, 1)).collect();
        assert_eq!(runs.get("laravel"), Some(&expected), "{prefix:?}: {runs:?}");
        assert_eq!(runs.len(), 1, "{prefix:?}: {runs:?}");
        assert_eq!(queue.size("shared").await.unwrap().total(), 0);
    }
}

#[tokio::test]
async fn laravel_and_rust_workers_on_one_queue_run_each_job_once() {
    for prefix in PREFIXES {
        let redis = TestRedis::start();
        let queue = prefixed_queue(&redis, prefix);
        // 500 pushed by Laravel, 500 dispatched from Rust.
        let port = redis.port().to_string();
        laravel("push.php", &[&port, prefix, "shared", "0", "500"]);
        dispatch_shared(&queue, 500..1000).await;
        let mut php = laravel_worker(&redis, prefix, "90");
        let mut rust = rust_worker(&redis, prefix, &["--stop-when-empty", "--concurrency", "4"]);
        assert!(rust.wait_exit(LONG).await.success());
        assert!(php.wait().unwrap().success());

        let runs = shared_runs(&redis, prefix).await;
        assert_each_ran_once(&runs, 0..1000, prefix);
        assert!(runs.values().flatten().all(|(_, attempt)| *attempt == 1));
        println!(
            "prefix {prefix:?}: 1,000 jobs (500 pushed by Laravel, 500 by Rust): {} run by Laravel's worker, {} by the Rust worker, 0 twice, 0 lost",
            runs.get("laravel").map_or(0, Vec::len),
            runs.get("rust").map_or(0, Vec::len)
        );
        assert_eq!(queue.size("shared").await.unwrap().total(), 0);
    }
}

#[tokio::test]
async fn a_reservation_abandoned_on_one_side_is_run_by_the_other() {
    for prefix in PREFIXES {
        let redis = TestRedis::start();
        let queue = prefixed_queue(&redis, prefix);
        let port = redis.port().to_string();

        // Laravel's worker reserves job 1 (for 1 s) and dies: the Rust worker runs it, attempt 2.
        laravel("push.php", &[&port, prefix, "shared", "1", "2"]);
        laravel("work.php", &[&port, prefix, "shared", "60", "1", "ABANDON"]);
        assert_eq!(queue.size("shared").await.unwrap().reserved, 1);
        // A second attempt needs tries left, as on Laravel's side (work.php: --tries 3).
        let args = ["--retry-after", "1", "--timeout", "0", "--tries", "3"];
        let mut rust = rust_worker(&redis, prefix, &args);
        wait_for(LONG, "the Rust worker ran job 1", || async {
            shared_runs(&redis, prefix).await.get("rust").cloned()
        })
        .await;

        // The Rust worker reserves job 2 (for 1 s, extended while it runs) and is killed:
        // Laravel's worker runs it, attempt 2.
        Shared {
            n: 2,
            ms: 60_000,
            fail_on: None,
        }
        .dispatch()
        .on_queue("shared")
        .sent_via(&queue)
        .await;
        rust.wait_for_event(LONG, "job 2 runs", |e| {
            e.status == "RUNNING" && e.attempt == 1
        })
        .await;
        rust.kill();
        let status = laravel_worker(&redis, prefix, "1").wait().unwrap();
        assert!(status.success());

        let runs = shared_runs(&redis, prefix).await;
        assert_eq!(
            runs.get("rust"),
            Some(&vec![(1, 2)]),
            "{prefix:?}: {runs:?}"
        );
        assert_eq!(
            runs.get("laravel"),
            Some(&vec![(2, 2)]),
            "{prefix:?}: {runs:?}"
        );
        assert_eq!(queue.size("shared").await.unwrap().total(), 0);
    }
}

#[tokio::test]
async fn a_laravel_job_class_runs_on_a_rust_worker_filled_from_its_properties() {
    for prefix in PREFIXES {
        let redis = TestRedis::start();
        let queue = prefixed_queue(&redis, prefix);
        laravel(
            "push.php",
            &[&redis.port().to_string(), prefix, "invoices", "CLASS"],
        );
        let mut worker = WorkerProcess::start(
            env!("CARGO_BIN_EXE_test_worker"),
            redis.url(),
            &[
                "--queue",
                "invoices",
                "--prefix",
                prefix,
                "--stop-when-empty",
            ],
        );
        assert!(worker.wait_exit(LONG).await.success());
        let invoices: Vec<String> = redis
            .conn()
            .await
            .lrange(INVOICES_KEY, 0, -1)
            .await
            .unwrap();
        assert_eq!(invoices.len(), 1, "{prefix:?}: {:#?}", worker.events());
        let invoice: serde_json::Value = serde_json::from_str(&invoices[0]).unwrap();
        assert_eq!(
            invoice,
            serde_json::json!({
                "side": "rust",
                "id": 7,
                "note": "first/second",
                "lines": {"a": 1.5, "b": [1, 2]},
                "customer": {
                    "class": "App\\Models\\Customer",
                    "id": 42,
                    "relations": ["orders"],
                    "connection": "mysql",
                    "collectionClass": null,
                },
                "attempt": 1,
            }),
            "{prefix:?}"
        );
        assert_eq!(queue.size("invoices").await.unwrap().total(), 0);
        assert!(queue.failed_jobs(10).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn an_encrypted_laravel_job_class_runs_with_the_apps_key_and_fails_clearly_without() {
    const KEY: &str = "base64:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const OTHER_KEY: &str = "base64:HxwdHhscGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";
    let redis = TestRedis::start();
    let queue = redis.queue();
    let port = redis.port().to_string();
    for (name, env) in [
        ("no-key", vec![]),
        ("other-key", vec![("APP_KEY", OTHER_KEY)]),
        ("app-key", vec![("APP_KEY", KEY)]),
    ] {
        laravel("push.php", &[&port, "", name, "CLASS", KEY]);
        let pushed: String = redis
            .conn()
            .await
            .lindex(format!("queues:{name}"), 0)
            .await
            .unwrap();
        assert!(!pushed.contains("first/second"), "encrypted: {pushed}");
        let mut worker = WorkerProcess::start_with_env(
            env!("CARGO_BIN_EXE_test_worker"),
            redis.url(),
            &["--queue", name, "--stop-when-empty"],
            &env,
        );
        assert!(worker.wait_exit(LONG).await.success());
    }
    let mut reasons: Vec<(String, String)> = queue
        .failed_jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| (record.queue, record.exception))
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            (
                "no-key".to_owned(),
                "the command of job class SendInvoice is encrypted (ShouldBeEncrypted): set the \
                 Laravel app's key (APP_KEY) to read it"
                    .to_owned()
            ),
            (
                "other-key".to_owned(),
                "cannot decrypt the command of job class SendInvoice: the MAC does not match: \
                 encrypted with another key, or altered"
                    .to_owned()
            ),
        ]
    );
    let invoices: Vec<String> = redis
        .conn()
        .await
        .lrange(INVOICES_KEY, 0, -1)
        .await
        .unwrap();
    assert_eq!(
        invoices.len(),
        1,
        "only the worker with the app's key ran it"
    );
    let invoice: serde_json::Value = serde_json::from_str(&invoices[0]).unwrap();
    assert_eq!(invoice["id"], 7);
    assert_eq!(invoice["note"], "first/second");
}

#[tokio::test]
async fn a_rust_job_declared_for_a_laravel_class_runs_on_laravels_worker_and_on_ours() {
    for prefix in PREFIXES {
        let redis = TestRedis::start();
        let queue = prefixed_queue(&redis, prefix);
        let invoice = |id| SendInvoice {
            id,
            note: "from Rust".to_owned(),
            lines: serde_json::json!({"a": 2.5}),
            customer: redjob::payload::laravel::ModelIdentifier {
                class: "App\\Models\\Customer".to_owned(),
                id: serde_json::json!(5),
                relations: vec![],
                connection: None,
                collection_class: None,
            },
        };
        invoice(8)
            .dispatch()
            .on_queue("invoices")
            .sent_via(&queue)
            .await;
        let mut conn = redis.conn().await;
        let pushed: String = conn
            .lindex(format!("{prefix}queues:invoices"), 0)
            .await
            .unwrap();
        assert!(
            pushed.contains(r#""job":"Illuminate\\Queue\\CallQueuedHandler@call""#),
            "{pushed}"
        );
        assert!(laravel_worker_on(&redis, prefix, "invoices", "90")
            .wait()
            .unwrap()
            .success());

        invoice(9)
            .dispatch()
            .on_queue("invoices")
            .sent_via(&queue)
            .await;
        let mut worker = WorkerProcess::start(
            env!("CARGO_BIN_EXE_test_worker"),
            redis.url(),
            &[
                "--queue",
                "invoices",
                "--prefix",
                prefix,
                "--stop-when-empty",
            ],
        );
        assert!(worker.wait_exit(LONG).await.success());

        // Laravel's side writes through its connection, so under the prefix.
        let mut entries: Vec<String> = conn
            .lrange(format!("{prefix}{INVOICES_KEY}"), 0, -1)
            .await
            .unwrap();
        if !prefix.is_empty() {
            let rust: Vec<String> = conn.lrange(INVOICES_KEY, 0, -1).await.unwrap();
            entries.extend(rust);
        }
        let invoices: Vec<serde_json::Value> = entries
            .iter()
            .map(|entry| serde_json::from_str(entry).unwrap())
            .collect();
        assert_eq!(invoices.len(), 2, "{prefix:?}: {invoices:#?}");
        assert_eq!(invoices[0]["side"], "laravel");
        assert_eq!(invoices[0]["id"], 8);
        assert_eq!(invoices[0]["note"], "from Rust");
        assert_eq!(invoices[0]["lines"], serde_json::json!({"a": 2.5}));
        assert_eq!(invoices[1]["side"], "rust");
        assert_eq!(invoices[1]["id"], 9);
        assert_eq!(queue.size("invoices").await.unwrap().total(), 0);
        assert!(queue.failed_jobs(10).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_job_that_fails_on_one_side_is_retried_on_the_other() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let port = redis.port().to_string();
    let rust_once = |redis: &TestRedis| {
        WorkerProcess::start(
            env!("CARGO_BIN_EXE_test_worker"),
            redis.url(),
            &["--queue", "shared", "--once", "--tries", "3"],
        )
    };

    // Job 1 fails on its first attempt on a Rust worker and is released; Laravel's worker
    // runs it on attempt 2.
    Shared {
        n: 1,
        ms: 0,
        fail_on: Some("rust".to_owned()),
    }
    .dispatch()
    .on_queue("shared")
    .sent_via(&queue)
    .await;
    let mut rust = rust_once(&redis);
    assert!(rust.wait_exit(LONG).await.success());
    assert!(
        rust.events()
            .iter()
            .any(|e| e.status == "RELEASED" && e.attempt == 1),
        "{:#?}",
        rust.events()
    );
    laravel("work.php", &[&port, "", "shared", "60", "90", "ONCE"]);

    // Job 2 fails on its first attempt on Laravel's worker, which releases it; a Rust worker
    // runs it on attempt 2.
    laravel("push.php", &[&port, "", "shared", "2", "3", "laravel"]);
    laravel("work.php", &[&port, "", "shared", "60", "90", "ONCE"]);
    let mut rust = rust_once(&redis);
    assert!(rust.wait_exit(LONG).await.success());

    let runs = shared_runs(&redis, "").await;
    assert_eq!(runs.get("laravel"), Some(&vec![(1, 2)]), "{runs:?}");
    assert_eq!(runs.get("rust"), Some(&vec![(2, 2)]), "{runs:?}");
    assert_eq!(queue.size("shared").await.unwrap().total(), 0);
    assert!(queue.failed_jobs(10).await.unwrap().is_empty());
}

/// Every entry of the shared job's record list `key`, as JSON.
async fn shared_entries(redis: &TestRedis, key: &str) -> Vec<serde_json::Value> {
    let entries: Vec<String> = redis.conn().await.lrange(key, 0, -1).await.unwrap();
    entries
        .iter()
        .map(|entry| serde_json::from_str(entry).unwrap())
        .collect()
}

#[tokio::test]
async fn a_laravel_push_with_a_trace_and_a_context_continues_that_trace_on_a_rust_worker() {
    let receiver = OtlpReceiver::start();
    let redis = TestRedis::start();
    let (trace_id, span_id) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let traceparent = format!("00-{trace_id}-{span_id}-01");
    let port = redis.port().to_string();
    laravel(
        "push.php",
        &[&port, "", "shared", "TRACE", &traceparent, "r-42"],
    );
    let mut worker = receiver.exporting_worker(
        env!("CARGO_BIN_EXE_test_worker"),
        &redis,
        &["--queue", "shared", "--stop-when-empty"],
    );
    assert!(worker.wait_exit(LONG).await.success());
    let attempt = &receiver.wait_for_named("process queues:shared", 1).await[0];
    assert_eq!(attempt.service, "redjob-worker", "named by default");
    assert_eq!(attempt.trace_id, trace_id, "{attempt:#?}");
    assert_eq!(attempt.parent_span_id, span_id, "{attempt:#?}");
    let entries = shared_entries(&redis, SHARED_KEY).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["side"], "rust");
    assert_eq!(
        entries[0]["request_id"], "r-42",
        "Laravel's Context reached the job"
    );
}

#[tokio::test]
async fn a_rust_dispatch_in_a_span_reaches_a_laravel_job_with_its_traceparent_and_context() {
    let receiver = OtlpReceiver::start();
    let redis = TestRedis::start();
    let queue = redis.queue();
    let exporting = Exporting::to(&receiver, "dispatcher");
    Shared {
        n: 1,
        ms: 0,
        fail_on: None,
    }
    .dispatch()
    .on_queue("shared")
    .log_context(LogContext::new().with("request_id", "r-7"))
    .sent_via(&queue)
    .instrument(tracing::info_span!("checkout"))
    .await;
    exporting.flush().await;
    let checkout = receiver.wait_for_named("checkout", 1).await.remove(0);
    let send = receiver
        .wait_for_named("send queues:shared", 1)
        .await
        .remove(0);

    let status = laravel_worker(&redis, "", "90").wait().unwrap();
    assert!(status.success());
    let entries = shared_entries(&redis, SHARED_KEY).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["side"], "laravel");
    let expected = format!("00-{}-{}-01", checkout.trace_id, send.span_id);
    assert_eq!(entries[0]["traceparent"], expected.as_str());
    assert_eq!(
        entries[0]["request_id"], "r-7",
        "PHP unserialized the context's value"
    );
}

#[tokio::test]
async fn grouped_jobs_never_reach_a_laravel_worker_on_the_same_queue() {
    for prefix in PREFIXES {
        let redis = TestRedis::start();
        let queue = prefixed_queue(&redis, prefix);
        // 300 jobs of the queue's own, 200 in 8 groups (20 of them delayed by a second).
        let mut bulk = redjob::Bulk::via(&queue);
        for n in 0..500u64 {
            let job = Shared {
                n,
                ms: 0,
                fail_on: None,
            };
            let dispatch = job.dispatch().on_queue("shared");
            let dispatch = match n {
                0..300 => dispatch,
                300..480 => dispatch.group(format!("tenant-{}", n % 8)),
                _ => dispatch
                    .group(format!("tenant-{}", n % 8))
                    .delay(Duration::from_secs(1)),
            };
            bulk.add(dispatch).unwrap();
        }
        bulk.send().await.unwrap();
        let mut php = laravel_worker(&redis, prefix, "90");
        let mut rust = rust_worker(&redis, prefix, &["--concurrency", "4"]);
        wait_for(LONG, "every job ran", || async {
            let runs = shared_runs(&redis, prefix).await;
            (runs.values().map(Vec::len).sum::<usize>() == 500).then_some(())
        })
        .await;
        rust.kill();
        assert!(php.wait().unwrap().success());
        let runs = shared_runs(&redis, prefix).await;
        assert_each_ran_once(&runs, 0..500, prefix);
        let on_laravel: Vec<u64> = runs
            .get("laravel")
            .map(|runs| runs.iter().map(|(n, _)| *n).collect())
            .unwrap_or_default();
        assert!(
            on_laravel.iter().all(|n| *n < 300),
            "{prefix:?}: Laravel's worker ran grouped jobs: {on_laravel:?}"
        );
        println!(
            "prefix {prefix:?}: 300 jobs of the queue's own and 200 grouped: Laravel's worker ran {} (none grouped), the Rust worker {}",
            on_laravel.len(),
            500 - on_laravel.len()
        );
    }
}
