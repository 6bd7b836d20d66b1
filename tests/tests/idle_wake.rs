//! End-to-end tests of an idle worker's wake-up against a real redis-server: the pop it sends
//! behind its blocking wait, the jobs that pop reserves while the worker is busy, and a stop
//! while it waits.

use examples::{now_ms, Record, Sleep};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redjob::admin::Admin;
use redjob::RedisQueue;
use std::time::{Duration, Instant};
use tests::monitor::Monitor;
use tests::worker_process::WorkerProcess;
use tests::{
    blocked_in_blpop, wait_for_empty_queue, wait_for_idle_worker, wait_until, SentVia, TestRedis,
};

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// Starts a worker with `args` on `redis` and waits until it is idle, blocked in `BLPOP`
/// (`conn` is a connection to the same server); returns it with the address of its blocked
/// connection.
async fn start_idle_worker(
    redis: &TestRedis,
    conn: &MultiplexedConnection,
    args: &[&str],
) -> (WorkerProcess, String) {
    let worker = start_worker(redis.url(), args);
    worker.wait_started().await;
    let waiting = wait_for_idle_worker(conn, LONG).await;
    (worker, waiting)
}

/// Whether a MONITOR line is a pop of the queue `default`: the one script call whose keys end
/// with the rotation's own-turn counter.
fn is_pop(line: &str) -> bool {
    line.contains("\"EVALSHA\"") && line.contains("\"queues:default:groups:own\"")
}

/// Pushes a `Record` job to the queue `name`; returns its uuid.
async fn push_record(queue: &RedisQueue, name: &str) -> String {
    Record { due_ms: now_ms() }
        .dispatch()
        .on_queue(name)
        .sent_via(queue)
        .await
        .to_string()
}

/// Waits until `worker` logged the job `uuid` done; `what` names the job in a timeout.
async fn wait_done(worker: &WorkerProcess, uuid: &str, what: &str) {
    worker
        .wait_for_event(LONG, what, |e| e.uuid == uuid && e.status == "DONE")
        .await;
}

#[tokio::test]
async fn a_job_pushed_to_an_idle_worker_is_reserved_by_the_pop_sent_behind_its_wait() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let conn = redis.conn().await;
    // --sleep 30: no timer pops the queue while the worker waits.
    let (worker, waiting) = start_idle_worker(&redis, &conn, &["--sleep", "30"]).await;
    let monitor = Monitor::start(redis.port()).await;

    let uuid = push_record(&queue, "default").await;
    wait_done(&worker, &uuid, "the pushed job is done").await;

    let lines = monitor.lines();
    let first_pop = lines
        .iter()
        .find(|line| is_pop(line))
        .unwrap_or_else(|| panic!("no pop among the commands run:\n{}", lines.join("\n")));
    assert!(
        first_pop.contains(&format!(" {waiting}] ")),
        "the first pop after the push came from another connection than the BLPOP's \
         ({waiting}): {first_pop}"
    );
}

#[tokio::test]
async fn a_job_pushed_after_the_server_lost_its_scripts_still_starts_at_once() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    // --sleep 30: the push must wake the worker, though its pop behind the wait meets NOSCRIPT.
    let (worker, _) = start_idle_worker(&redis, &conn, &["--sleep", "30"]).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();

    let pushed_at = Instant::now();
    let uuid = push_record(&queue, "default").await;
    wait_done(&worker, &uuid, "the pushed job is done").await;
    let took = pushed_at.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "the job took {took:?} to run after the push"
    );
}

/// A worker of one slot takes a sleep of 3 s (pushed, or delayed by `delay`) from its idle
/// wait; a job pushed while it sleeps must be run by another, idle, worker, at once.
async fn a_busy_worker_leaves_a_push_to_an_idle_one(delay: Option<Duration>) {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let conn = redis.conn().await;
    let (busy, _) =
        start_idle_worker(&redis, &conn, &["--concurrency", "1", "--sleep", "30"]).await;
    let mut sleep = Sleep { ms: 3000 }.dispatch();
    if let Some(delay) = delay {
        sleep = sleep.delay(delay);
    }
    let sleeping = sleep.sent_via(&queue).await.to_string();
    busy.wait_for_event(LONG, "the sleep runs", |e| {
        e.uuid == sleeping && e.status == "RUNNING"
    })
    .await;
    let other = start_worker(redis.url(), &["--sleep", "30"]);
    other.wait_started().await;
    wait_for_idle_worker(&conn, LONG).await;
    let pushed = push_record(&queue, "default").await;
    wait_done(&other, &pushed, "the idle worker ran the pushed job").await;

    assert!(
        !busy
            .events()
            .iter()
            .any(|e| e.uuid == sleeping && e.status == "DONE"),
        "the sleep ended before the other worker ran the pushed job"
    );
    assert!(
        !busy.events().iter().any(|e| e.uuid == pushed),
        "the busy worker took the pushed job"
    );
    let attempts: Vec<u64> = other
        .events()
        .iter()
        .filter(|e| e.uuid == pushed && e.status == "RUNNING")
        .map(|e| e.attempt)
        .collect();
    assert_eq!(attempts, [1]);
}

#[tokio::test]
async fn a_worker_busy_since_its_wait_leaves_a_pushed_job_to_another_worker() {
    // Its due time, not a push, ends the wait: the worker's one slot takes the sleep, and no
    // pop may stay behind a wait to reserve the next job for a worker with no free slot.
    a_busy_worker_leaves_a_push_to_an_idle_one(Some(Duration::from_millis(300))).await;
}

#[tokio::test]
async fn a_worker_whose_only_slot_took_a_pushed_job_leaves_the_next_push_to_an_idle_worker() {
    // The pop behind the wait takes the sleep into the worker's one slot and fills it: the
    // worker asks again once the slot is free, and must not wait meanwhile for pushes it could
    // not run.
    a_busy_worker_leaves_a_push_to_an_idle_one(None).await;
}

#[tokio::test]
async fn a_queue_paused_while_its_worker_waits_ends_the_wait_and_the_pop_behind_it() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let conn = redis.conn().await;
    let (worker, _) = start_idle_worker(&redis, &conn, &["--queue", "slow", "--sleep", "30"]).await;

    // The wait in place has a pop of `slow` behind it: the pause must end both, well before
    // --sleep ends the wait by itself, and no wait follows while every queue is paused.
    assert!(admin.pause("slow").await.unwrap());
    wait_until(
        Duration::from_secs(10),
        "the worker no longer waits",
        || async { blocked_in_blpop(&conn).await.is_none() },
    )
    .await;
    let slow = push_record(&queue, "slow").await;
    let size = queue.size("slow").await.unwrap();
    assert_eq!((size.ready, size.reserved), (1, 0), "{size:?}");

    assert!(admin.resume("slow").await.unwrap());
    wait_done(&worker, &slow, "the resumed queue's job is done").await;
    wait_for_empty_queue(&queue, "slow", LONG).await;
}

#[tokio::test]
async fn a_worker_stopped_while_idle_ends_its_wait_at_once_and_leaves_no_job_reserved() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    for round in 0..5 {
        // --sleep 30: the BLPOP would wait 30 s if the stop did not end it.
        let (mut worker, _) = start_idle_worker(&redis, &conn, &["--sleep", "30"]).await;
        // A push at the moment of the stop: its job must run, or stay ready, never be left
        // reserved by a pop behind a connection that closed.
        let uuid = push_record(&queue, "default").await;
        let stopped_at = Instant::now();
        worker.signal("TERM");
        let status = worker.wait_exit(LONG).await;
        assert!(
            status.success(),
            "round {round}: the worker exited with {status}"
        );
        let took = stopped_at.elapsed();
        assert!(
            took < Duration::from_secs(10),
            "round {round}: the stop took {took:?}"
        );
        let reserved: u64 = conn.zcard("queues:default:reserved").await.unwrap();
        assert_eq!(reserved, 0, "round {round}: a job was left reserved");
        let ready: u64 = conn.llen("queues:default").await.unwrap();
        let done = worker
            .events()
            .iter()
            .any(|e| e.uuid == uuid && e.status == "DONE");
        assert!(
            done != (ready == 1),
            "round {round}: the job ran: {done}; jobs ready: {ready}"
        );
        let _: () = conn.del("queues:default").await.unwrap();
    }
}

#[tokio::test]
async fn a_lone_job_costs_an_idle_worker_one_pop() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let conn = redis.conn().await;
    // --sleep 30: no timer pops the queue while the worker waits.
    let (worker, _) = start_idle_worker(&redis, &conn, &["--sleep", "30"]).await;
    let monitor = Monitor::start(redis.port()).await;

    // The pop behind the wait reserves each job and comes back short, which says the queue
    // had no more: the worker waits again without a pop that finds it empty.
    const JOBS: usize = 3;
    for i in 0..JOBS {
        let uuid = push_record(&queue, "default").await;
        wait_done(&worker, &uuid, &format!("pushed job {i} is done")).await;
        wait_for_idle_worker(&conn, LONG).await;
    }

    let lines = monitor.lines();
    let pops: Vec<&String> = lines.iter().filter(|line| is_pop(line)).collect();
    assert_eq!(
        pops.len(),
        JOBS,
        "pops for {JOBS} jobs pushed one at a time:\n{}",
        lines.join("\n")
    );
    wait_for_empty_queue(&queue, "default", LONG).await;
}
