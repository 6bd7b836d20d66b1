//! The admin library against a real redis-server: failed jobs (list, filter, show, retry,
//! forget, flush), queue sizes and contents, and what workers publish (heartbeat records,
//! per-minute metrics). Pause and restart are tested through the `jobsctl` command (jobs_cli.rs).

use examples::{Flaky, Noop, Panic};
use redis::AsyncCommands;
use redjob::admin::{Admin, AdminError, FailedFilter, FailedSelection, Section};
use redjob::queue::keys::{KeyLayout, Keys, QueueKeys};
use redjob::Payload;
use std::time::Duration;
use tests::protocol::WorkerCalls;
use tests::scenarios::{billing_worker_with_four_jobs, failed_jobs_on};
use tests::worker_process::WorkerProcess;
use tests::{wait_for, wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(30);

const TEST_WORKER: &str = env!("CARGO_BIN_EXE_test_worker");

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(TEST_WORKER, redis_url, args)
}

#[tokio::test]
async fn failed_jobs_are_listed_filtered_shown_and_forgotten() {
    let redis = TestRedis::start();
    let admin = Admin::new(redis.queue());
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["q1", "q2", "q1"]).await;

    let all = admin.failed(&FailedFilter::default()).await.unwrap();
    let listed: Vec<&str> = all.iter().map(|e| e.record.uuid.as_str()).collect();
    // q1 comes first in the worker's priority order, so q1's jobsctl failed first.
    assert_eq!(listed, [&uuids[1], &uuids[2], &uuids[0]], "newest first");
    let positions: Vec<u64> = all.iter().map(|e| e.position).collect();
    assert_eq!(positions, [3, 2, 1]);
    assert!(all
        .iter()
        .all(|e| e.job == "panic" && e.attempts == Some(0)));

    let on_q1 = FailedFilter {
        queue: Some("q1".into()),
        ..FailedFilter::default()
    };
    assert_eq!(admin.failed(&on_q1).await.unwrap().len(), 2);
    let by_text = FailedFilter {
        text: Some("PANICKING ON PURPOSE".into()),
        limit: Some(1),
        ..FailedFilter::default()
    };
    let found = admin.failed(&by_text).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].record.uuid, uuids[1]);
    let other_job = FailedFilter {
        job: Some("noop".into()),
        ..FailedFilter::default()
    };
    assert!(admin.failed(&other_job).await.unwrap().is_empty());

    let shown = admin.failed_job(&uuids[1]).await.unwrap();
    assert_eq!((shown.position, shown.record.queue.as_str()), (3, "q2"));
    assert!(shown.record.exception.contains("panicking on purpose"));

    admin.forget(&uuids[1]).await.unwrap();
    assert!(matches!(
        admin.forget(&uuids[1]).await,
        Err(AdminError::FailedJobNotFound(uuid)) if uuid == uuids[1]
    ));
    assert!(matches!(
        admin.failed_job(&uuids[1]).await,
        Err(AdminError::FailedJobNotFound(_))
    ));
    assert_eq!(admin.failed_count().await.unwrap(), 2);
}

#[tokio::test]
async fn a_retried_job_goes_back_to_its_queue_with_attempts_0_and_runs_again() {
    let redis = TestRedis::start();
    let admin = Admin::new(redis.queue());
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["q1", "q2"]).await;
    let record = admin.failed_job(&uuids[0]).await.unwrap().record;

    let report = admin
        .retry(&FailedSelection::Uuids(vec![
            uuids[0].clone(),
            "no-such-uuid".into(),
        ]))
        .await
        .unwrap();
    assert_eq!(report.retried.len(), 1);
    assert_eq!(report.retried[0].uuid, uuids[0]);
    assert_eq!(report.retried[0].queue, "q1");
    assert_eq!(report.missing, ["no-such-uuid"]);

    let mut conn = redis.conn().await;
    let ready: Vec<String> = conn.lrange("queues:q1", 0, -1).await.unwrap();
    assert_eq!(
        ready,
        [redjob::payload::with_attempts(&record.payload, 0).unwrap()]
    );
    assert_eq!(Payload::from_json(&ready[0]).unwrap().attempts, 0);
    let tokens: u64 = conn.llen("queues:q1:notify").await.unwrap();
    assert_eq!(tokens, 1);
    assert!(matches!(
        admin.failed_job(&uuids[0]).await,
        Err(AdminError::FailedJobNotFound(_))
    ));
    let index: Vec<String> = conn
        .zrange(KeyLayout::Standalone.failed_jobs_index(), 0, -1)
        .await
        .unwrap();
    assert_eq!(index, [uuids[1].clone()]);

    // A second run fails it again, on attempt 1: the count started from 0.
    let mut worker = start_worker(redis.url(), &["--queue", "q1", "--stop-when-empty"]);
    assert!(worker.wait_exit(LONG).await.success());
    let attempts: Vec<u64> = worker.events().iter().map(|e| e.attempt).collect();
    assert_eq!(attempts, [1, 1]);
    assert!(admin.failed_job(&uuids[0]).await.is_ok());
}

#[tokio::test]
async fn retry_by_queue_range_and_all() {
    let redis = TestRedis::start();
    let admin = Admin::new(redis.queue());
    let queue = redis.queue();
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["a", "b", "a", "b", "a"]).await;

    let by_queue = admin
        .retry(&FailedSelection::Queue("b".into()))
        .await
        .unwrap();
    let mut retried: Vec<String> = by_queue.retried.into_iter().map(|r| r.uuid).collect();
    retried.sort();
    let mut expected = vec![uuids[1].clone(), uuids[3].clone()];
    expected.sort();
    assert_eq!(retried, expected);
    assert_eq!(queue.size("b").await.unwrap().ready, 2);

    // Left: uuids 0, 2, 4 at positions 1, 2, 3.
    assert!(matches!(
        admin
            .retry(&FailedSelection::Range { first: 0, last: 2 })
            .await,
        Err(AdminError::InvalidRange { .. })
    ));
    let range = admin
        .retry(&FailedSelection::Range { first: 2, last: 3 })
        .await
        .unwrap();
    let retried: Vec<String> = range.retried.into_iter().map(|r| r.uuid).collect();
    assert_eq!(retried, [uuids[2].clone(), uuids[4].clone()]);

    let all = admin.retry(&FailedSelection::All).await.unwrap();
    assert_eq!(all.retried.len(), 1);
    assert_eq!(all.retried[0].uuid, uuids[0]);
    assert_eq!(admin.failed_count().await.unwrap(), 0);
    assert_eq!(queue.size("a").await.unwrap().ready, 3);
}

#[tokio::test]
async fn flush_deletes_all_or_only_records_older_than_the_age() {
    let redis = TestRedis::start();
    let admin = Admin::new(redis.queue());
    let uuids = failed_jobs_on(TEST_WORKER, &redis, &["q", "q", "q"]).await;
    let mut conn = redis.conn().await;
    let two_hours_ago = redis.server_time().await - 7200.0;
    let _: () = conn
        .zadd(
            KeyLayout::Standalone.failed_jobs_index(),
            &uuids[0],
            two_hours_ago,
        )
        .await
        .unwrap();

    let pruned = admin
        .flush_failed(Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    assert!(admin.failed_job(&uuids[0]).await.is_err());
    assert_eq!(admin.failed_count().await.unwrap(), 2);

    assert_eq!(admin.flush_failed(None).await.unwrap(), 2);
    let left: u64 = conn
        .hlen(KeyLayout::Standalone.failed_jobs())
        .await
        .unwrap();
    assert_eq!(left, 0);
    assert_eq!(admin.failed_count().await.unwrap(), 0);
}

#[tokio::test]
async fn queue_stats_and_inspect_show_each_section() {
    let redis = TestRedis::start();
    let admin = Admin::new(redis.queue());
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let mut old = Noop {}.dispatch().on_queue("q").envelope().unwrap().payload;
    let created = (redis.server_time().await as i64) - 100;
    old = old.replace(
        &format!(
            "\"createdAt\":{}",
            Payload::from_json(&old).unwrap().created_at.unwrap()
        ),
        &format!("\"createdAt\":{created}"),
    );
    let _: () = conn.rpush("queues:q", &old).await.unwrap();
    Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
    let reserved_uuid = Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
    let delayed_uuid = Noop {}
        .dispatch()
        .on_queue("q")
        .delay(600)
        .sent_via(&queue)
        .await;
    // Reserve the two oldest ready jobs: the third one stays ready.
    let now = redis.server_time().await;
    let popped = queue
        .pop(&QueueKeys::new("q"), Duration::from_secs(90), 1, 1000)
        .await
        .unwrap();
    assert_eq!(popped.jobs.len(), 1);

    let stats = admin.queue_stats("q").await.unwrap();
    assert_eq!(
        (stats.size, stats.ready, stats.delayed, stats.reserved),
        (4, 2, 1, 1)
    );
    assert!(!stats.paused);
    // The oldest ready job is now the second dispatched, created just now.
    assert!(stats.oldest_ready_secs.unwrap() < 30, "{stats:?}");

    let reserved = admin.inspect("q", Section::Reserved, 10).await.unwrap();
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].attempts, Some(1));
    assert_eq!(reserved[0].job.as_deref(), Some("noop"));
    let expiry = reserved[0].at.unwrap().timestamp_millis() as f64 / 1000.0;
    assert!((expiry - (now + 90.0)).abs() < 10.0, "expiry {expiry}");

    let delayed = admin.inspect("q", Section::Delayed, 10).await.unwrap();
    assert_eq!(delayed[0].uuid, Some(delayed_uuid.to_string()));
    let due = delayed[0].at.unwrap().timestamp_millis() as f64 / 1000.0;
    assert!((due - (now + 600.0)).abs() < 10.0, "due {due}");

    let ready = admin.inspect("q", Section::Ready, 1).await.unwrap();
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].at, None);
    assert_eq!(ready[0].attempts, Some(0));
    assert_ne!(ready[0].uuid, Some(reserved_uuid.to_string()));

    // A ready job dispatched 100 s ago is what the age measures.
    let _: () = conn.lpush("queues:q", &old).await.unwrap();
    let stats = admin.queue_stats("q").await.unwrap();
    let age = stats.oldest_ready_secs.unwrap();
    assert!((100..130).contains(&age), "age {age}");

    assert_eq!(admin.queues().await.unwrap(), ["q"]);
    assert_eq!(admin.clear("q").await.unwrap(), 5);
    assert_eq!(queue.size("q").await.unwrap().total(), 0);
}

#[tokio::test]
async fn a_live_worker_publishes_its_record_and_per_minute_metrics() {
    let redis = TestRedis::start();
    let admin = Admin::new(redis.queue());
    let queue = redis.queue();
    let worker = billing_worker_with_four_jobs(TEST_WORKER, &redis).await;
    Flaky { fail_times: 1 }
        .dispatch()
        .on_queue("q2")
        .tries(2)
        .sent_via(&queue)
        .await;

    // 3 noop + 1 panic + 2 attempts of the flaky job.
    let info = wait_for(LONG, "the worker record counts 6 attempts", || async {
        let workers = admin.workers().await.unwrap();
        workers.into_iter().find(|w| w.processed == 6)
    })
    .await;
    assert_eq!(info.name, "billing");
    assert_eq!(info.pid, worker.pid());
    assert_eq!(info.queues, ["q1", "q2"]);
    assert_eq!((info.concurrency, info.running, info.failed), (3, 0, 1));
    assert!(!info.host.is_empty());
    let mut conn = redis.conn().await;
    let ttl: i64 = conn.ttl(queue.keys().worker(&info.id)).await.unwrap();
    assert!((1..=10).contains(&ttl), "ttl {ttl}");

    let metrics = wait_for(LONG, "the metrics count 6 attempts", || async {
        let metrics = admin.metrics(5).await.unwrap();
        let total: u64 = metrics.iter().map(|m| m.bucket.total().processed).sum();
        (total == 6).then_some(metrics)
    })
    .await;
    assert_eq!(metrics.len(), 5);
    let sum =
        |pick: &dyn Fn(&redjob::admin::MinuteMetrics) -> Option<redjob::admin::OutcomeCounts>| {
            let mut total = redjob::admin::OutcomeCounts::default();
            for minute in &metrics {
                if let Some(counters) = pick(minute) {
                    total.add(&counters);
                }
            }
            total
        };
    let q1 = sum(&|m| m.bucket.queues.get("q1").copied());
    let q2 = sum(&|m| m.bucket.queues.get("q2").copied());
    assert_eq!((q1.processed, q1.failed, q1.released), (3, 0, 0));
    assert_eq!((q2.processed, q2.failed, q2.released), (3, 1, 1));
    let flaky = sum(&|m| m.bucket.jobs.get("flaky").copied());
    assert_eq!((flaky.processed, flaky.released, flaky.done()), (2, 1, 1));
    assert_eq!(sum(&|m| m.bucket.jobs.get("noop").copied()).processed, 3);
    let keys_with_ttl: Vec<String> = conn.keys(Keys::default().metrics_pattern()).await.unwrap();
    assert!(!keys_with_ttl.is_empty());
    for key in keys_with_ttl {
        let ttl: i64 = conn.ttl(&key).await.unwrap();
        assert!(ttl > 23 * 3600 && ttl <= 24 * 3600 + 60, "{key} ttl {ttl}");
    }

    // The recent attempts of q2, newest first: the flaky job's retry came last.
    let recent = wait_for(LONG, "q2's three attempts are listed", || async {
        let recent = admin.recent("q2", 10).await.unwrap();
        (recent.len() == 3).then_some(recent)
    })
    .await;
    use redjob::admin::AttemptOutcome;
    assert_eq!(
        (recent[0].job.as_str(), recent[0].outcome, recent[0].attempt),
        ("flaky", AttemptOutcome::Done, 2)
    );
    let panicked = recent.iter().find(|r| r.job == "panic").unwrap();
    assert_eq!(
        (panicked.outcome, panicked.attempt),
        (AttemptOutcome::Failed, 1)
    );
    assert!(panicked
        .reason
        .as_deref()
        .unwrap()
        .starts_with("panicked: "));
    let released = recent
        .iter()
        .find(|r| r.outcome == AttemptOutcome::Released)
        .unwrap();
    assert_eq!((released.job.as_str(), released.attempt), ("flaky", 1));
    assert!(recent
        .iter()
        .all(|r| r.worker == "billing" && r.queue == "q2"));
    assert_eq!(admin.recent("q1", 2).await.unwrap().len(), 2);
    let ttl: i64 = conn.ttl(queue.keys().recent("q1")).await.unwrap();
    assert!(ttl > 23 * 3600, "ttl {ttl}");

    drop(worker);
    wait_until(LONG, "the killed worker's record expires", || async {
        admin.workers().await.unwrap().is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_retried_signed_job_still_verifies_and_runs() {
    const SECRET: &str = "0f3c9a7e5b1d2468ace0bdf13579b2d4c6e8fa0b1c2d3e4f5a6b7c8d9e0f1a2b";
    let redis = TestRedis::start();
    let queue = redis.queue_with(redjob::QueueConfig {
        signing_key: Some(redjob::payload::signing::SigningKey::new(SECRET)),
        ..redjob::QueueConfig::default()
    });
    let admin = Admin::new(redis.queue());
    let uuid = Panic {}.dispatch().sent_via(&queue).await.to_string();
    let run = || async {
        let program = env!("CARGO_BIN_EXE_test_worker");
        let env = [("JOBS_SIGNING_KEY", SECRET)];
        let args = ["--stop-when-empty"];
        let mut worker = WorkerProcess::start_with_env(program, redis.url(), &args, &env);
        assert!(worker.wait_exit(LONG).await.success());
        worker
    };
    run().await;
    let report = admin
        .retry(&FailedSelection::Uuids(vec![uuid.clone()]))
        .await
        .unwrap();
    assert_eq!(report.retried.len(), 1);

    // The signature does not cover attempts, the one field a retry changes: the job runs.
    let worker = run().await;
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == uuid && e.status == "RUNNING"));
    let record = admin.failed_job(&uuid).await.unwrap().record;
    assert!(
        record.exception.starts_with("panicked"),
        "{}",
        record.exception
    );
}
