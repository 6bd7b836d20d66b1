//! The queues a worker takes jobs from, against the queues its linked job types declare: a
//! worker warns once at start of declared queues it does not serve, naming them and their job
//! types, and a binary's own default queues serve when `--queue` names none, which overrides
//! them.

use examples::orders::{ChargeCard, MailReceipt};
use examples::Noop;
use redjob::Job;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(30);

/// What the start-up warning says, before its fields.
const UNSERVED: &str = "declare queues it does not take jobs from";

/// The queues the worker's `worker started` line says it takes jobs from.
fn started_queues(worker: &WorkerProcess) -> String {
    let started = worker.json_lines_with("worker started");
    assert_eq!(started.len(), 1, "{:?}", worker.lines());
    started[0]["queues"]
        .as_str()
        .expect("a queues field")
        .to_owned()
}

/// Pushes a no-op job to `queue` and waits until `worker` has run it: every line the worker
/// logged at start has been read by then.
async fn run_one_on(redis: &TestRedis, worker: &WorkerProcess, queue: &str) {
    let uuid = Noop {}
        .dispatch()
        .on_queue(queue)
        .sent_via(&redis.queue())
        .await
        .to_string();
    worker
        .wait_for_event(LONG, "the no-op job ran", |e| {
            e.uuid == uuid && e.status == "DONE"
        })
        .await;
}

#[tokio::test]
async fn a_worker_warns_once_at_start_of_the_queues_its_job_types_declare_and_it_does_not_serve() {
    let redis = TestRedis::start();
    // `--queue` left at its default: `default` alone, while ChargeCard declares `payments` and
    // MailReceipt `mail`.
    let worker = WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis.url(), &[]);
    run_one_on(&redis, &worker, "default").await;

    let warned = worker.json_lines_with(UNSERVED);
    assert_eq!(warned.len(), 1, "one warning: {:#?}", worker.lines());
    let warning = &warned[0];
    assert_eq!(warning["level"], "WARN");
    assert_eq!(warning["queues"], "default");
    let unserved = warning["unserved"].as_str().expect("an unserved field");
    assert!(
        unserved.contains(&format!("payments ({})", ChargeCard::NAME))
            && unserved.contains(&format!("mail ({})", MailReceipt::NAME)),
        "the queues and their job types: {unserved}"
    );
    assert!(
        !unserved.contains(Noop::NAME),
        "a job type without a queue of its own is on default, which is served: {unserved}"
    );
}

#[tokio::test]
async fn a_worker_that_serves_every_declared_queue_does_not_warn() {
    let redis = TestRedis::start();
    let worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "payments,default,mail"],
    );
    run_one_on(&redis, &worker, "mail").await;
    assert_eq!(
        worker.json_lines_with(UNSERVED),
        Vec::<serde_json::Value>::new(),
        "no warning"
    );
}

#[tokio::test]
async fn a_binarys_own_default_queues_serve_when_no_queue_is_given() {
    let redis = TestRedis::start();
    let worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &[],
        &[("TEST_DEFAULT_QUEUES", "payments,mail")],
    );
    run_one_on(&redis, &worker, "mail").await;
    assert_eq!(started_queues(&worker), "payments,mail");
    // Now the job types without a queue of their own are the ones left unserved.
    let warned = worker.json_lines_with(UNSERVED);
    assert_eq!(warned.len(), 1, "{:#?}", worker.lines());
    let unserved = warned[0]["unserved"].as_str().expect("an unserved field");
    assert!(unserved.starts_with("default ("), "{unserved}");
    assert!(unserved.contains(Noop::NAME), "{unserved}");
}

#[tokio::test]
async fn the_command_lines_queue_overrides_a_binarys_own_default_queues() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let waiting = Noop {}.dispatch().on_queue("mail").sent_via(&queue).await;
    let worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "high"],
        &[("TEST_DEFAULT_QUEUES", "payments,mail")],
    );
    run_one_on(&redis, &worker, "high").await;
    assert_eq!(started_queues(&worker), "high");
    let waiting = waiting.to_string();
    assert!(
        !worker.events().iter().any(|e| e.uuid == waiting),
        "the job on a default queue was not taken"
    );
    let sizes = queue.size("mail").await.unwrap();
    assert_eq!(sizes.ready, 1, "the job on mail still waits: {sizes:?}");
}
