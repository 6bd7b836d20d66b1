//! Unique jobs against a real redis-server and worker processes: a duplicate dispatch is
//! refused naming the job that holds the lock, the lock is taken with the push and freed
//! with the settle (on done and on final failure, not on a release), a job unique until
//! processing frees it as it starts, and a killed worker's job keeps it until it is done.

use examples::{RebuildIndex, RefreshCache, ReindexSearch, UNIQUE_KEY};
use redis::AsyncCommands;
use redjob::{Bulk, Dispatched, Error, Payload};
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(60);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

async fn lock_holder(redis: &TestRedis, key: &str) -> Option<String> {
    redis.conn().await.get(key).await.unwrap()
}

async fn runs_of(redis: &TestRedis) -> Vec<serde_json::Value> {
    let entries: Vec<String> = redis.conn().await.lrange(UNIQUE_KEY, 0, -1).await.unwrap();
    entries
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

#[tokio::test]
async fn a_duplicate_dispatch_is_refused_naming_the_job_that_holds_the_lock() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let first = RebuildIndex {
        shop: 7,
        ..Default::default()
    };
    let uuid = first.clone().dispatch().sent_via(&queue).await;

    // The lock and the push are one step: the lock holds the uuid of the job pushed with it.
    let lock = "jobs:unique:rebuild-index:7";
    assert_eq!(lock_holder(&redis, lock).await, Some(uuid.to_string()));
    let ttl: i64 = redis.conn().await.pttl(lock).await.unwrap();
    assert!(
        ttl > 590_000 && ttl <= 600_000,
        "the lock lasts unique_for: {ttl} ms"
    );
    let ready: Vec<String> = redis
        .conn()
        .await
        .lrange("queues:default", 0, -1)
        .await
        .unwrap();
    let payload = Payload::from_json(&ready[0]).unwrap();
    assert_eq!(payload.unique.unwrap().key, "rebuild-index:7");

    match first.clone().dispatch().via(&queue).await {
        Err(Error::Duplicate(duplicate)) => {
            assert_eq!(duplicate.holder, uuid);
            assert_eq!(duplicate.job, "rebuild-index");
            assert_eq!(duplicate.unique_id, "7");
            assert!(duplicate.to_string().contains(&uuid.to_string()));
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    // Delayed dispatches are refused the same way.
    let delayed = first.clone().dispatch().delay(60).via(&queue).await;
    assert!(matches!(delayed, Err(Error::Duplicate(_))), "{delayed:?}");

    // A bulk dispatch reports each item.
    let mut bulk = Bulk::via(&queue);
    for shop in [7, 8, 8] {
        let job = RebuildIndex {
            shop,
            ..Default::default()
        };
        bulk.add(job.dispatch()).unwrap();
    }
    let sent = bulk.send().await.unwrap();
    assert!(matches!(&sent[0], Dispatched::Duplicate(d) if d.holder == uuid));
    let Dispatched::Queued(eight) = sent[1] else {
        panic!("{sent:?}")
    };
    assert!(matches!(&sent[2], Dispatched::Duplicate(d) if d.holder == eight));

    let size = queue.size("default").await.unwrap();
    assert_eq!(
        (size.ready, size.delayed),
        (2, 0),
        "one job per shop in Redis"
    );
}

#[tokio::test]
async fn the_lock_is_kept_through_a_release_and_freed_when_the_job_is_done() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = RebuildIndex {
        shop: 1,
        ms: 0,
        fail_first: 1,
    };
    let uuid = job.clone().dispatch().sent_via(&queue).await;
    let worker = start_worker(redis.url(), &["--backoff", "2"]);
    worker
        .wait_for_event(LONG, "the first attempt released", |e| {
            e.uuid == uuid.to_string() && e.status == "RELEASED"
        })
        .await;
    let lock = "jobs:unique:rebuild-index:1";
    assert_eq!(lock_holder(&redis, lock).await, Some(uuid.to_string()));
    let again = job.clone().dispatch().via(&queue).await;
    assert!(matches!(again, Err(Error::Duplicate(_))), "{again:?}");

    worker
        .wait_for_event(LONG, "the second attempt done", |e| {
            e.uuid == uuid.to_string() && e.status == "DONE"
        })
        .await;
    // The DONE line comes just before the call that acknowledges the job and frees the lock.
    wait_until(
        LONG,
        "the lock is freed with the acknowledgement",
        || async { lock_holder(&redis, lock).await.is_none() },
    )
    .await;
    let next = job
        .dispatch()
        .via(&queue)
        .await
        .expect("a new dispatch is queued");
    assert_ne!(next, uuid);
}

#[tokio::test]
async fn the_lock_is_freed_when_the_job_fails_for_good() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // Three tries, all failing.
    let job = RebuildIndex {
        shop: 2,
        ms: 0,
        fail_first: 5,
    };
    let uuid = job.clone().dispatch().sent_via(&queue).await;
    let _worker = start_worker(redis.url(), &["--backoff", "0"]);
    wait_until(LONG, "the job failed", || async {
        queue.failed_job(&uuid.to_string()).await.unwrap().is_some()
    })
    .await;
    assert_eq!(
        lock_holder(&redis, "jobs:unique:rebuild-index:2").await,
        None
    );
    assert_eq!(runs_of(&redis).await.len(), 3);
    job.dispatch()
        .via(&queue)
        .await
        .expect("a new dispatch is queued");
}

#[tokio::test]
async fn a_job_unique_until_processing_frees_its_lock_as_it_starts() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = RefreshCache { shop: 3, ms: 2_000 };
    let uuid = job.clone().dispatch().sent_via(&queue).await;
    let again = job.clone().dispatch().via(&queue).await;
    assert!(
        matches!(again, Err(Error::Duplicate(_))),
        "queued: {again:?}"
    );

    let _worker = start_worker(redis.url(), &["--concurrency", "1"]);
    wait_until(LONG, "the refresh started", || async {
        !runs_of(&redis).await.is_empty()
    })
    .await;
    // It runs for 2 s: meanwhile one more refresh may be queued, but only one.
    let second = job
        .clone()
        .dispatch()
        .via(&queue)
        .await
        .expect("queued while it runs");
    assert_ne!(second, uuid);
    let third = job.dispatch().via(&queue).await;
    assert!(matches!(third, Err(Error::Duplicate(d)) if d.holder == second));
    wait_until(LONG, "both refreshes ran", || async {
        runs_of(&redis).await.len() == 2
    })
    .await;
    wait_until(LONG, "the lock is free", || async {
        lock_holder(&redis, "jobs:unique:refresh-cache:3")
            .await
            .is_none()
    })
    .await;
}

#[tokio::test]
async fn a_killed_workers_unique_job_runs_again_and_frees_its_lock_when_done() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = RebuildIndex {
        shop: 4,
        ms: 1_500,
        fail_first: 0,
    };
    let uuid = job.clone().dispatch().sent_via(&queue).await;
    let args = ["--retry-after", "1"];
    let mut doomed = start_worker(redis.url(), &args);
    wait_until(LONG, "the rebuild started", || async {
        !runs_of(&redis).await.is_empty()
    })
    .await;
    doomed.kill();
    let lock = "jobs:unique:rebuild-index:4";
    assert_eq!(
        lock_holder(&redis, lock).await,
        Some(uuid.to_string()),
        "kept: the job is not done"
    );
    let again = job.clone().dispatch().via(&queue).await;
    assert!(matches!(again, Err(Error::Duplicate(_))), "{again:?}");

    let rescuer = start_worker(redis.url(), &args);
    rescuer
        .wait_for_event(LONG, "the rebuild done on the second worker", |e| {
            e.uuid == uuid.to_string() && e.status == "DONE"
        })
        .await;
    wait_until(
        LONG,
        "the lock is freed with the acknowledgement",
        || async { lock_holder(&redis, lock).await.is_none() },
    )
    .await;
    let runs = runs_of(&redis).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[1]["attempt"], 2);
}

#[tokio::test]
async fn jobsctl_lists_the_locks_and_frees_one_whose_job_was_lost() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = RebuildIndex {
        shop: 9,
        ..Default::default()
    };
    let uuid = job.clone().dispatch().sent_via(&queue).await;
    // The job is lost (its queue cleared by hand): the lock keeps new dispatches out.
    queue.clear("default").await.unwrap();
    assert!(matches!(
        job.clone().dispatch().via(&queue).await,
        Err(Error::Duplicate(_))
    ));

    let jobs = tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let locks = jobs.json(&["unique"]);
    assert_eq!(locks[0]["key"], "jobs:unique:rebuild-index:9");
    assert_eq!(locks[0]["holder"], uuid.to_string());
    assert!(locks[0]["ttl_ms"].as_u64().unwrap() > 590_000);
    let table = jobs.run(&["unique"]);
    assert!(
        table.stdout.contains("jobs:unique:rebuild-index:9"),
        "{}",
        table.stdout
    );

    let freed = jobs.run(&["unique", "forget", "jobs:unique:rebuild-index:9"]);
    assert!(freed.status.success(), "{}", freed.stderr);
    assert!(freed
        .stdout
        .contains("Freed unique lock jobs:unique:rebuild-index:9"));
    let again = jobs.run(&["unique", "forget", "jobs:unique:rebuild-index:9"]);
    assert_eq!(again.code(), Some(1), "{}", again.stderr);
    assert!(again
        .stderr
        .contains("no unique lock jobs:unique:rebuild-index:9"));
    // Only unique locks can be freed this way.
    let other = jobs.run(&["unique", "forget", "queues:default"]);
    assert_eq!(other.code(), Some(1));
    job.dispatch().via(&queue).await.expect("dispatched again");
}

#[tokio::test]
async fn debounced_dispatches_leave_one_job_with_the_latest_data_run_once_after_the_burst() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let _worker = start_worker(redis.url(), &[]);
    let mut conn = redis.conn().await;
    let first_at = examples::now_ms();
    for version in 1..=5 {
        ReindexSearch { shop: 1, version }
            .dispatch()
            .sent_via(&queue)
            .await;
        let waiting: u64 = conn.zcard("queues:default:delayed").await.unwrap();
        assert_eq!(waiting, 1, "one job in Redis after dispatch {version}");
    }
    ReindexSearch {
        shop: 2,
        version: 1,
    }
    .dispatch()
    .sent_via(&queue)
    .await;
    wait_until(LONG, "two reindexes ran", || async {
        runs_of(&redis).await.len() == 2
    })
    .await;
    let runs = runs_of(&redis).await;
    let shop_one: Vec<_> = runs.iter().filter(|r| r["shop"] == 1).collect();
    assert_eq!(shop_one.len(), 1, "{runs:?}");
    assert_eq!(shop_one[0]["version"], 5, "the latest data");
    let started = shop_one[0]["started_ms"].as_u64().unwrap();
    assert!(
        started >= first_at + 900,
        "ran {} ms after the burst began",
        started - first_at
    );
}

#[tokio::test]
async fn a_debounced_job_runs_by_its_max_wait_however_long_the_dispatches_go_on() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let _worker = start_worker(redis.url(), &[]);
    let first_at = examples::now_ms();
    // A dispatch every 300 ms for 5 s: the 1 s debounce alone would never run it.
    let mut version = 0;
    while examples::now_ms() < first_at + 5_000 {
        version += 1;
        ReindexSearch { shop: 3, version }
            .dispatch()
            .sent_via(&queue)
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let runs = runs_of(&redis).await;
    assert!(
        !runs.is_empty(),
        "ran within its 3 s max_wait while dispatches went on"
    );
    let first_run = runs[0]["started_ms"].as_u64().unwrap() - first_at;
    assert!(
        (2_500..4_500).contains(&first_run),
        "first run {first_run} ms after the first dispatch"
    );
}
