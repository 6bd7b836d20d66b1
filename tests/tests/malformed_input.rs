//! The malformed-input set: payloads pushed straight into a queue's list that no job can run.
//! Each ends in the failed-job store with its reason, nothing is lost, and the worker goes on
//! to the valid jobs queued behind them.
//!
//! The set: not JSON, JSON without the payload fields, an unknown job type, data that does not
//! fit the job's struct, a 10 MB payload, and bytes that are not UTF-8. (Random byte strings
//! are in `worker_flow.rs`; payloads that fail the signature check in `security.rs`.) An
//! unknown job type and data that does not fit may be a newer version's, which a newer worker
//! runs: they wait for one for `--unknown-job-grace`, their attempts given back, and fail
//! only after it (the set runs with no grace, so that they fail at once).

use examples::{Noop, Sleep};
use redis::AsyncCommands;
use redjob::queue::keys::QueueKeys;
use redjob::{Payload, QueueConfig};
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(60);

/// One malformed payload and the start of the reason its failed-job record must give.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    reason: String,
}

fn cases() -> Vec<Case> {
    let sleep = Sleep { ms: 1 }.dispatch().envelope().unwrap().payload;
    let noop = Noop {}.dispatch().envelope().unwrap().payload;
    // Valid in every other way: a sleep job whose data carries 10 MB the job ignores.
    let padding = "x".repeat(10 * 1024 * 1024);
    let ten_mb = sleep.replace(
        r#""data":{"ms":1}"#,
        &format!(r#""data":{{"ms":1,"padding":"{padding}"}}"#),
    );
    let mut not_utf8 = noop.clone().into_bytes();
    not_utf8.splice(2..2, [0xff, 0xfe, 0xc3]);
    vec![
        Case {
            name: "not JSON",
            bytes: b"this is not JSON".to_vec(),
            reason: "malformed payload: not valid JSON".to_owned(),
        },
        Case {
            name: "JSON without the payload fields",
            bytes: br#"{"hello":"world"}"#.to_vec(),
            reason: "malformed payload: not a job payload".to_owned(),
        },
        Case {
            name: "an unknown job type",
            bytes: noop
                .replace(r#""job":"noop""#, r#""job":"NoSuchJob""#)
                .into_bytes(),
            reason: "unknown job type \"NoSuchJob\"".to_owned(),
        },
        Case {
            name: "data that does not fit the struct",
            bytes: sleep
                .replace(r#""data":{"ms":1}"#, r#""data":{"ms":"soon"}"#)
                .into_bytes(),
            reason: "cannot decode the data of job sleep".to_owned(),
        },
        Case {
            name: "a 10 MB payload",
            reason: format!(
                "payload too large: {} bytes, over the limit of {} bytes; not decoded",
                ten_mb.len(),
                QueueConfig::default().max_payload_bytes
            ),
            bytes: ten_mb.into_bytes(),
        },
        Case {
            name: "invalid UTF-8",
            bytes: not_utf8,
            reason: "malformed payload: not valid UTF-8".to_owned(),
        },
    ]
}

#[tokio::test]
async fn each_malformed_payload_is_failed_with_its_reason_and_the_next_valid_job_runs() {
    let redis = TestRedis::start();
    // The failed-job records of 10 MB payloads take a moment to write on a busy machine.
    let queue = redis.queue_with(QueueConfig {
        command_timeout: Duration::from_secs(30),
        ..QueueConfig::default()
    });
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("default");
    let cases = cases();
    let mut valid = Vec::new();
    for case in &cases {
        let _: () = conn.rpush(&keys.ready, &case.bytes).await.unwrap();
        // A valid job right behind each malformed one.
        valid.push(Noop {}.dispatch().sent_via(&queue).await.to_string());
    }
    // The size limit alone stops the 10 MB payload: under a larger limit it would run.
    let ten_mb = &cases[4];
    assert!(ten_mb.bytes.len() > QueueConfig::default().max_payload_bytes);
    assert!(Payload::from_json(std::str::from_utf8(&ten_mb.bytes).unwrap()).is_ok());

    // Reading the 10 MB payload and moving it into the failed-job store takes the worker's
    // resident memory to about 150 MB, which the allocator keeps: under the default --memory
    // of 128 the worker could stop (status 12) between jobs, as a limit says it should. What
    // this test checks is the payloads' fate, so the limit is out of its way.
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &[
            "--stop-when-empty",
            "--concurrency",
            "1",
            "--memory",
            "1024",
            // What waits for a newer worker is tested below: here every case fails at once.
            "--unknown-job-grace",
            "0",
        ],
    );
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");

    let records = queue.failed_jobs(100).await.unwrap();
    let events = worker.events();
    let mut failed_with_reason = 0;
    for case in &cases {
        let matching: Vec<_> = records
            .iter()
            .filter(|r| r.exception.starts_with(&case.reason))
            .collect();
        assert_eq!(
            matching.len(),
            1,
            "{}: one failed record whose reason starts with {:?}; reasons: {:#?}",
            case.name,
            case.reason,
            records.iter().map(|r| &r.exception).collect::<Vec<_>>()
        );
        // The record keeps the payload as pushed, whole (bytes that are not UTF-8 as U+FFFD).
        assert_eq!(
            matching[0].payload,
            String::from_utf8_lossy(&case.bytes),
            "{}: the record keeps the payload",
            case.name
        );
        failed_with_reason += 1;
    }
    assert_eq!(records.len(), cases.len(), "no other job failed");
    // Nothing malformed ever reached a handler.
    assert!(
        !events
            .iter()
            .any(|e| e.status == "RUNNING" && e.job != "noop"),
        "{events:#?}"
    );
    let valid_done = valid
        .iter()
        .filter(|uuid| {
            events
                .iter()
                .any(|e| e.uuid == **uuid && e.status == "DONE")
        })
        .count();
    assert_eq!(
        valid_done,
        valid.len(),
        "every valid job behind a malformed one ran"
    );
    let left = queue.size("default").await.unwrap();
    assert_eq!(left.total(), 0, "{left:?}");
    let pushed = cases.len() + valid.len();
    let lost = pushed - failed_with_reason - valid_done - left.total() as usize;
    assert_eq!(lost, 0);
    println!(
        "malformed input: {} malformed payloads pushed ({}), {} failed with a reason, {} valid \
         jobs behind them all done, {lost} lost",
        cases.len(),
        cases.iter().map(|c| c.name).collect::<Vec<_>>().join(", "),
        failed_with_reason,
        valid.len(),
    );
}

#[tokio::test]
async fn jobs_this_worker_cannot_run_wait_for_the_grace_with_their_attempts_given_back_then_fail() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("default");
    let cases = cases();
    let unknown = &cases[2];
    let misfit = &cases[3];
    for case in [unknown, misfit] {
        let _: () = conn.rpush(&keys.ready, &case.bytes).await.unwrap();
    }
    let uuid_of = |case: &Case| {
        Payload::from_json(std::str::from_utf8(&case.bytes).unwrap())
            .unwrap()
            .uuid
            .to_string()
    };

    // A worker that finds only jobs it cannot run puts them back and stops as on an empty
    // queue: nothing failed, their attempts given back, the first meeting written down.
    let mut first = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--stop-when-empty", "--unknown-job-grace", "4"],
    );
    assert!(first.wait_exit(LONG).await.success());
    assert!(queue.failed_jobs(10).await.unwrap().is_empty());
    for case in [unknown, misfit] {
        let uuid = uuid_of(case);
        assert!(
            first
                .events()
                .iter()
                .any(|e| e.uuid == uuid && e.status == "UNRUNNABLE"),
            "{}: {:#?}",
            case.name,
            first.events()
        );
    }
    let delayed: Vec<String> = conn.zrange(&keys.delayed, 0, -1).await.unwrap();
    assert_eq!(delayed.len(), 2, "{delayed:?}");
    let mut first_met = Vec::new();
    for raw in &delayed {
        let payload = Payload::from_json(raw).unwrap();
        assert_eq!(payload.attempts, 0, "its attempt given back: {raw}");
        assert!(payload.unrunnable_since > 0, "{raw}");
        first_met.push(i64::from(payload.unrunnable_since));
    }

    // Within the grace they keep coming back; after it, each fails saying it waited.
    let worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--unknown-job-grace", "4"],
    );
    wait_until(LONG, "both jobs failed", || async {
        queue.failed_jobs(10).await.unwrap().len() == 2
    })
    .await;
    for case in [unknown, misfit] {
        let record = queue.failed_job(&uuid_of(case)).await.unwrap().unwrap();
        assert!(
            record.exception.starts_with(&case.reason)
                && record
                    .exception
                    .ends_with("(no worker that can run it took it within --unknown-job-grace 4s)"),
            "{}: {}",
            case.name,
            record.exception
        );
        let failed_at = record.failed_at().unwrap().timestamp();
        let met = *first_met.iter().min().unwrap();
        assert!(
            failed_at >= met + 4,
            "{}: failed at {failed_at}, within the grace from {met}",
            case.name
        );
    }
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
    drop(worker);
}

#[tokio::test]
async fn operators_see_the_job_types_no_live_worker_can_run_and_since_when() {
    let redis = TestRedis::start();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("default");
    let cases = cases();
    // A type no worker links, and a type the worker links whose data it cannot decode.
    for case in [&cases[2], &cases[3]] {
        let _: () = conn.rpush(&keys.ready, &case.bytes).await.unwrap();
    }
    let addr = format!("127.0.0.1:{}", tests::free_port());
    let worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--unknown-job-grace", "600", "--metrics-addr", &addr],
    );
    let admin = redjob::admin::Admin::new(redis.queue());
    let listed = tests::wait_for(LONG, "both types are listed", || async {
        let listed = admin.unrunnable().await.unwrap();
        (listed.len() == 2).then_some(listed)
    })
    .await;
    let unknown = listed.iter().find(|t| t.job == "NoSuchJob").unwrap();
    let misfit = listed.iter().find(|t| t.job == "sleep").unwrap();
    assert_eq!(unknown.queue, "default");
    assert_eq!(unknown.runnable_by, 0, "no live worker links it");
    assert_eq!(
        misfit.runnable_by, 1,
        "the live worker links it, but not this version"
    );
    assert!(unknown.reason.starts_with("unknown job type \"NoSuchJob\""));
    let age = chrono::Utc::now() - unknown.since;
    assert!(age.num_seconds() < 60, "first met {age} ago");

    let jobsctl =
        tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let json = jobsctl.json(&["unrunnable"]);
    let jobs: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["job"].as_str().unwrap())
        .collect();
    assert_eq!(jobs.len(), 2, "{json}");
    assert!(
        jobs.contains(&"NoSuchJob") && jobs.contains(&"sleep"),
        "{json}"
    );
    let table = jobsctl.run(&["unrunnable"]);
    assert_eq!(table.code(), Some(0));
    assert!(
        table.stdout.contains("NoSuchJob") && table.stdout.contains("NONE"),
        "{}",
        table.stdout
    );

    // The metrics flag the type no live worker links, with how long its jobs have waited.
    let waited = tests::wait_for(LONG, "the gauge of the unknown type", || async {
        let body = tests::http::get(&addr, "/metrics").ok()?.body;
        body.lines()
            .filter(|line| line.starts_with("jobs_unrunnable_wait_seconds{"))
            .find(|line| line.contains("job=\"NoSuchJob\"") && line.contains("runnable=\"no\""))
            .and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
    })
    .await;
    assert!((0.0..60.0).contains(&waited), "{waited}");
    drop(worker);
}
