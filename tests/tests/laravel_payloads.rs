//! Payloads Laravel wrote (jobs-core/tests/fixtures/laravel/: Laravel 8.83's own queue classes,
//! and Laravel 11's shape) run on a Rust worker, on their first attempt; a payload whose data a
//! Laravel worker rounded while reserving it fails with that reason instead of running with a
//! wrong value.

use examples::RECORDS_KEY;
use redis::AsyncCommands;
use redjob::queue::keys::QueueKeys;
use redjob::Payload;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::TestRedis;

const LONG: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../jobs-core/tests/fixtures/laravel/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("{path}: {err}"))
        .trim_end()
        .to_owned()
}

fn uuid_of(raw: &str) -> String {
    Payload::from_json(raw).unwrap().uuid.to_string()
}

#[tokio::test]
async fn payloads_laravel_wrote_run_and_rounded_numbers_fail_with_the_reason() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("laravel");
    let now = redis.server_time().await;

    let pushed: Vec<String> = [
        "laravel8-push",
        "laravel8-push-no-data",
        "laravel8-push-empty-array",
        "laravel11-push",
    ]
    .into_iter()
    .map(fixture)
    .collect();
    for raw in &pushed {
        let _: () = conn.rpush(&keys.ready, raw).await.unwrap();
    }
    // Queue::later's payload, due now; and one a Laravel worker reserved and released.
    let later = fixture("laravel8-later");
    let released = fixture("laravel8-released-by-laravel");
    let _: () = conn.zadd(&keys.delayed, &later, now).await.unwrap();
    let _: () = conn.zadd(&keys.delayed, &released, now).await.unwrap();

    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &[
            "--queue",
            "laravel",
            "--stop-when-empty",
            "--concurrency",
            "1",
        ],
    );
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    let events = worker.events();

    for raw in pushed.iter().chain([&later]) {
        let uuid = uuid_of(raw);
        let done: Vec<_> = events
            .iter()
            .filter(|e| e.uuid == uuid && e.status == "DONE")
            .collect();
        assert_eq!(done.len(), 1, "{raw} ran once: {events:#?}");
        assert_eq!(done[0].attempt, 1, "{raw}");
    }

    // The released job had attempt 1 from Laravel's worker: this is its second.
    let failed = queue.failed_jobs(10).await.unwrap();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].uuid, uuid_of(&released));
    assert!(
        failed[0].exception.starts_with(
            "malformed payload: its data holds 1.2345678901235e+16 rounded to 14 significant digits"
        ),
        "{}",
        failed[0].exception
    );
    let failed_event = events
        .iter()
        .find(|e| e.status == "FAILED")
        .expect("a FAILED event");
    assert_eq!(failed_event.attempt, 0, "it never ran");

    // The record jobs ran with the data Laravel gave them.
    let records: Vec<String> = conn.lrange(RECORDS_KEY, 0, -1).await.unwrap();
    assert_eq!(records.len(), 3, "{records:#?}");
    for record in &records {
        let record: serde_json::Value = serde_json::from_str(record).unwrap();
        assert_eq!(record["due_ms"], 1763769600123u64);
        assert_eq!(record["attempt"], 1);
    }
    let size = queue.size("laravel").await.unwrap();
    assert_eq!(size.total(), 0, "nothing left behind: {size:?}");
}
