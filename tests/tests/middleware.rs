//! Job middleware against real redis-servers and worker processes: rate limits, funnels,
//! overlap locks, exception throttles and skips, with several workers sharing them, holds
//! that outlive neither their job nor a killed worker, and requeues that cost no attempt.

use examples::{Guarded, GUARDED_KEY};
use redis::AsyncCommands;
use redjob::__worker::AttemptSetup;
use redjob::middleware::{Limit, RateLimited};
use redjob::{Bulk, Payload};
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(60);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// What each run of a [`Guarded`] job recorded, in the order they started.
#[derive(Debug, Clone, serde::Deserialize)]
struct Run {
    n: u64,
    attempt: u32,
    started_ms: u64,
    running: i64,
}

async fn runs(redis: &TestRedis) -> Vec<Run> {
    let mut conn = redis.conn().await;
    let entries: Vec<String> = conn.lrange(GUARDED_KEY, 0, -1).await.unwrap();
    let mut runs: Vec<Run> = entries
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    runs.sort_by_key(|r| r.started_ms);
    runs
}

async fn wait_for_runs(redis: &TestRedis, count: usize, timeout: Duration) -> Vec<Run> {
    let mut conn = redis.conn().await;
    wait_until(timeout, format!("{count} guarded runs"), || {
        let mut conn = conn.clone();
        async move { conn.llen::<_, usize>(GUARDED_KEY).await.unwrap() >= count }
    })
    .await;
    let _ = conn.ping::<String>().await;
    runs(redis).await
}

async fn dispatch_all(redis: &TestRedis, jobs: impl IntoIterator<Item = Guarded>) {
    let mut bulk = Bulk::via(&redis.queue());
    for job in jobs {
        bulk.add(job.dispatch()).unwrap();
    }
    bulk.send().await.unwrap();
}

/// Keys of the middleware's own state that still hold something.
async fn middleware_keys(redis: &TestRedis) -> Vec<String> {
    let mut conn = redis.conn().await;
    let mut keys = Vec::new();
    for pattern in ["jobs:overlap:*", "jobs:funnel:*"] {
        let found: Vec<String> = conn.keys(pattern).await.unwrap();
        keys.extend(found);
    }
    keys
}

#[tokio::test]
async fn a_rate_limit_shared_by_two_workers_never_admits_more_than_its_limit_in_a_window() {
    let redis = TestRedis::start();
    let jobs = (0..20).map(|n| Guarded {
        n,
        group: "api".into(),
        rate: Some(5),
        ..Default::default()
    });
    dispatch_all(&redis, jobs).await;
    // --tries 1: a job over the limit is requeued without counting an attempt, so none fails.
    let args = ["--tries", "1", "--concurrency", "4"];
    let (_a, _b) = (
        start_worker(redis.url(), &args),
        start_worker(redis.url(), &args),
    );
    let runs = wait_for_runs(&redis, 20, LONG).await;

    let starts: Vec<u64> = runs.iter().map(|r| r.started_ms).collect();
    // Admission happens on Redis's clock a moment before the handler starts: a 900 ms span
    // of starts is well inside one window of admissions.
    for (i, first) in starts.iter().enumerate() {
        let within = starts[i..].iter().filter(|s| **s < first + 900).count();
        assert!(
            within <= 5,
            "{within} runs started within 900 ms of {first}: {starts:?}"
        );
    }
    let span = starts.last().unwrap() - starts.first().unwrap();
    assert!(span >= 2_900, "20 jobs at 5 per second took only {span} ms");
    assert!(runs.iter().all(|r| r.attempt == 1), "{runs:?}");
    let failed: u64 = redis.conn().await.hlen("failed_jobs").await.unwrap();
    assert_eq!(failed, 0);
}

#[tokio::test]
async fn a_funnel_never_runs_more_than_its_slots_across_workers_and_frees_them_when_done() {
    let redis = TestRedis::start();
    let jobs = (0..12).map(|n| Guarded {
        n,
        group: "pdf".into(),
        ms: 200,
        funnel: Some(2),
        ..Default::default()
    });
    dispatch_all(&redis, jobs).await;
    let args = ["--tries", "1", "--concurrency", "4"];
    let (_a, _b) = (
        start_worker(redis.url(), &args),
        start_worker(redis.url(), &args),
    );
    let runs = wait_for_runs(&redis, 12, LONG).await;

    let peak = runs.iter().map(|r| r.running).max().unwrap();
    assert_eq!(
        peak, 2,
        "the funnel's two slots were used, never more: {runs:?}"
    );
    let queue = redis.queue();
    wait_until(LONG, "every job settled", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;
    assert_eq!(middleware_keys(&redis).await, Vec::<String>::new());
}

#[tokio::test]
async fn jobs_with_one_overlap_key_run_one_at_a_time_and_other_keys_run_beside_them() {
    let redis = TestRedis::start();
    let jobs = (0..8).map(|n| Guarded {
        n,
        group: format!("account-{}", n % 2),
        ms: 150,
        overlap: Some(format!("account-{}", n % 2)),
        ..Default::default()
    });
    dispatch_all(&redis, jobs).await;
    let _worker = start_worker(redis.url(), &["--tries", "1", "--concurrency", "8"]);
    let runs = wait_for_runs(&redis, 8, LONG).await;

    // Each group counts its own running handlers: one key never runs twice at once.
    assert!(runs.iter().all(|r| r.running == 1), "{runs:?}");
    // The two keys overlapped each other: the eight 150 ms jobs took about four runs' time.
    let span = runs.last().unwrap().started_ms - runs[0].started_ms;
    assert!(
        span < 8 * 150,
        "the two keys ran one after the other ({span} ms)"
    );
    let queue = redis.queue();
    wait_until(LONG, "every job settled", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;
    assert_eq!(middleware_keys(&redis).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_skipped_job_is_settled_as_done_without_running() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let uuid = Guarded {
        skip: true,
        ..Default::default()
    }
    .dispatch()
    .sent_via(&queue)
    .await;
    let mut worker = start_worker(redis.url(), &["--stop-when-empty"]);
    assert!(worker.wait_exit(LONG).await.success());
    let statuses: Vec<String> = worker
        .events()
        .into_iter()
        .filter(|e| e.uuid == uuid.to_string())
        .map(|e| e.status)
        .collect();
    assert_eq!(statuses, ["RUNNING", "SKIPPED"]);
    assert!(runs(&redis).await.is_empty());
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn an_exception_throttle_holds_jobs_back_once_its_errors_are_used_up() {
    let redis = TestRedis::start();
    let jobs = (0..4).map(|n| Guarded {
        n,
        group: "crm".into(),
        fail: true,
        throttle: Some(2),
        window_ms: Some(60_000),
        ..Default::default()
    });
    dispatch_all(&redis, jobs).await;
    let worker = start_worker(redis.url(), &["--tries", "1", "--concurrency", "1"]);
    let queue = redis.queue();
    // Two errors open the breaker for the minute: the other two jobs wait in :delayed,
    // requeued without counting their attempt.
    wait_until(LONG, "two failed jobs", || async {
        queue.failed_jobs(10).await.unwrap().len() == 2
    })
    .await;
    let mut conn = redis.conn().await;
    let waiting = wait_until(LONG, "two requeued jobs", || {
        let mut conn = conn.clone();
        async move {
            conn.zcard::<_, u64>("queues:default:delayed")
                .await
                .unwrap()
                == 2
        }
    });
    waiting.await;
    let delayed: Vec<(String, f64)> = conn
        .zrange_withscores("queues:default:delayed", 0, -1)
        .await
        .unwrap();
    let now = redis.server_time().await;
    for (raw, due) in &delayed {
        let payload = Payload::from_json(raw).unwrap();
        assert_eq!(payload.attempts, 0, "a requeue costs no attempt: {raw}");
        assert!(payload.requeues >= 1, "{raw}");
        assert!(
            due - now > 30.0,
            "held back until the window ends, due in {}",
            due - now
        );
    }
    assert_eq!(
        runs(&redis).await.len(),
        2,
        "the held-back jobs did not run"
    );
    let requeued = worker
        .events()
        .iter()
        .filter(|e| e.status == "REQUEUED")
        .count();
    assert!(requeued >= 2);
}

#[tokio::test]
async fn a_job_requeued_more_often_than_allowed_counts_its_attempts_again() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // The first job holds the overlap lock for a while; the second finds it taken.
    let holder = Guarded {
        n: 1,
        ms: 3_000,
        overlap: Some("k".into()),
        ..Default::default()
    };
    holder.dispatch().sent_via(&queue).await;
    let _worker = start_worker(
        redis.url(),
        &["--tries", "1", "--concurrency", "2", "--max-requeues", "2"],
    );
    wait_for_runs(&redis, 1, LONG).await;
    let waiter = Guarded {
        n: 2,
        overlap: Some("k".into()),
        ..Default::default()
    };
    let uuid = waiter.dispatch().sent_via(&queue).await;
    // Two free requeues, then a release that counts: with one try, the job fails.
    wait_until(LONG, "the waiting job failed", || async {
        queue.failed_job(&uuid.to_string()).await.unwrap().is_some()
    })
    .await;
    let record = queue.failed_job(&uuid.to_string()).await.unwrap().unwrap();
    assert!(
        record.exception.contains("attempted too many times"),
        "{}",
        record.exception
    );
    let payload = Payload::from_json(&record.payload).unwrap();
    assert_eq!(payload.requeues, 2);
}

#[tokio::test]
async fn holds_of_a_killed_worker_come_free_within_retry_after_and_long_jobs_keep_theirs() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // Runs for 4 s, past retry_after (1.5 s): the heartbeat must keep its slot and its lock.
    let long = Guarded {
        n: 1,
        group: "g".into(),
        ms: 4_000,
        funnel: Some(1),
        overlap: Some("k".into()),
        ..Default::default()
    };
    let short = Guarded {
        n: 2,
        group: "g".into(),
        funnel: Some(1),
        overlap: Some("k".into()),
        ..Default::default()
    };
    let args = [
        "--retry-after",
        "1.5",
        "--timeout",
        "0",
        "--concurrency",
        "2",
    ];
    let worker = start_worker(redis.url(), &args);
    long.clone().dispatch().sent_via(&queue).await;
    wait_for_runs(&redis, 1, LONG).await;
    short.clone().dispatch().sent_via(&queue).await;
    let both = wait_for_runs(&redis, 2, LONG).await;
    assert_eq!(both[1].n, 2);
    assert!(
        both[1].started_ms >= both[0].started_ms + 4_000,
        "the short job ran while the long one held the slot: {both:?}"
    );
    drop(worker);

    // kill -9 while the long job holds both: another worker gets them within retry_after.
    redis.conn().await.del::<_, ()>(GUARDED_KEY).await.unwrap();
    let mut doomed = start_worker(redis.url(), &args);
    long.dispatch().sent_via(&queue).await;
    wait_for_runs(&redis, 1, LONG).await;
    doomed.kill();
    let killed_at = examples::now_ms();
    let _rescuer = start_worker(redis.url(), &args);
    short.dispatch().sent_via(&queue).await;
    // The long job comes back too, after retry_after; whichever of the two runs first, the
    // short one runs once the dead worker's holds have run out.
    let short_run = tests::wait_for(LONG, "the short job ran", || {
        let redis = &redis;
        async move { runs(redis).await.into_iter().find(|r| r.n == 2) }
    })
    .await;
    assert!(
        short_run.started_ms < killed_at + 1_500 + 3_000,
        "the holds came free {} ms after the kill",
        short_run.started_ms - killed_at
    );
}

#[tokio::test]
async fn a_job_refused_by_one_of_its_limits_is_counted_by_none_of_them() {
    use redjob::middleware::{Layer, Middleware, Next};
    use redjob::{JobContext, Request};
    use std::sync::Arc;

    let redis = TestRedis::start();
    let queue = Arc::new(redis.queue());
    let limited = RateLimited::new(Limit::per_minute(1).named("tight"))
        .and(Limit::per_minute(10).named("loose"));
    let mut ran = 0;
    let mut verdicts = Vec::new();
    for attempt in 1..=3 {
        let ctx = JobContext::new(uuid::Uuid::new_v4(), "limited", "default", attempt)
            .with_redis(queue.clone(), Duration::from_secs(90));
        let handler: redjob::middleware::JobFuture = Box::pin(async { Ok(()) });
        let chain: [Layer; 0] = [];
        limited
            .handle(&ctx, Next::new(&chain, handler))
            .await
            .unwrap();
        match ctx.take_request() {
            None => ran += 1,
            Some(Request::Requeue(wait)) => verdicts.push(wait),
            Some(other) => panic!("unexpected verdict {other:?}"),
        }
    }
    assert_eq!(ran, 1, "only the first run is admitted");
    assert_eq!(verdicts.len(), 2);
    assert!(
        verdicts.iter().all(|w| *w > Duration::from_secs(50)),
        "{verdicts:?}"
    );
    let mut conn = redis.conn().await;
    let tight: u64 = conn.zcard("jobs:limit:tight").await.unwrap();
    let loose: u64 = conn.zcard("jobs:limit:loose").await.unwrap();
    assert_eq!(
        (tight, loose),
        (1, 1),
        "the refused runs were counted by neither limit"
    );
}
