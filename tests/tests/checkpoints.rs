//! Resumable jobs against a real redis-server and real worker processes: a job marked
//! `#[job(resumable)]` saves checkpoints while it runs, and its next attempt starts from the
//! last one, after a deploy's stop or a crash; the checkpoint goes when the job settles done or
//! failed. The example job is `examples::Resumable`: steps of a few hundred milliseconds, each
//! appended to a list as it ends and followed by a checkpoint of the next step.

use examples::{Resumable, RESUMABLE_KEY};
use redis::AsyncCommands;
use std::time::Duration;
use tests::jobs_command::JobsCommand;
use tests::worker_process::WorkerProcess;
use tests::{on_both_layouts, wait_until, SentVia, Server, TestRedis};

const LONG: Duration = Duration::from_secs(60);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// The steps recorded for the job `uuid`, in order, each with the attempt that ran it.
async fn steps(
    conn: &mut (impl redis::aio::ConnectionLike + Send + Sync),
    uuid: &str,
) -> Vec<(u64, u64)> {
    let entries: Vec<String> = conn.lrange(RESUMABLE_KEY, 0, -1).await.unwrap();
    entries
        .iter()
        .map(|entry| serde_json::from_str::<serde_json::Value>(entry).unwrap())
        .filter(|entry| entry["uuid"] == uuid)
        .map(|entry| {
            (
                entry["step"].as_u64().unwrap(),
                entry["attempt"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The last checkpoint of the job `uuid` of the default queue, as Redis holds it.
async fn checkpoint(queue: &redjob::RedisQueue, uuid: &str) -> Option<String> {
    queue
        .checkpoint("default", uuid.parse().unwrap())
        .await
        .unwrap()
}

/// Dispatches a resumable job of `steps` steps of `ms` milliseconds; its uuid.
async fn dispatch(queue: &redjob::RedisQueue, steps: u64, ms: u64) -> String {
    Resumable { steps, ms }
        .dispatch()
        .sent_via(queue)
        .await
        .to_string()
}

/// Waits until the job `uuid` is acknowledged (DONE is logged as it is handed to its
/// acknowledgement, which deletes the checkpoint in the same step as the reservation).
async fn acknowledged_without_checkpoint(queue: &redjob::RedisQueue, uuid: &str) {
    wait_until(
        LONG,
        "the job is acknowledged and its checkpoint gone",
        || async {
            checkpoint(queue, uuid).await.is_none()
                && queue.size("default").await.unwrap().total() == 0
        },
    )
    .await;
}

async fn a_resumable_job_stopped_by_a_deploy_goes_on_from_its_last_checkpoint(redis: Server) {
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let uuid = dispatch(&queue, 20, 150).await;
    let mut old = start_worker(redis.url(), &["--tries", "1", "--grace", "30"]);
    wait_until(LONG, "five steps are done", || async {
        steps(&mut redis.conn().await, &uuid).await.len() >= 5
    })
    .await;
    // Operators see how far it got, though it is not tracked: the live worker says where it
    // runs.
    let jobsctl = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let shown = tests::wait_for(LONG, "jobsctl status shows the checkpoint", || async {
        let ran = jobsctl.run(&["--json", "status", &uuid]);
        let shown: serde_json::Value = serde_json::from_str(&ran.stdout).ok()?;
        (ran.code() == Some(0)).then_some(shown["checkpoint"].as_u64()?)
    })
    .await;
    assert!(shown >= 5, "the checkpoint names step {shown}");
    old.signal("TERM");
    assert_eq!(old.wait_exit(LONG).await.code(), Some(0));
    let before = steps(&mut conn, &uuid).await;
    let saved = checkpoint(&queue, &uuid).await;
    assert_eq!(
        saved,
        Some(before.len().to_string()),
        "the checkpoint names the next step"
    );

    let new = start_worker(redis.url(), &["--tries", "1"]);
    new.wait_for_event(LONG, "the job is done", |e| {
        e.uuid == uuid && e.status == "DONE"
    })
    .await;
    let all = steps(&mut conn, &uuid).await;
    let numbers: Vec<u64> = all.iter().map(|(step, _)| *step).collect();
    assert_eq!(
        numbers,
        (0..20).collect::<Vec<_>>(),
        "every step once: none repeated, none skipped"
    );
    assert!(
        all.iter().all(|(_, attempt)| *attempt == 1),
        "the stop gave the attempt back: {all:?}"
    );
    acknowledged_without_checkpoint(&queue, &uuid).await;
}
on_both_layouts!(a_resumable_job_stopped_by_a_deploy_goes_on_from_its_last_checkpoint);

#[tokio::test]
async fn a_resumable_job_of_a_killed_worker_resumes_from_its_last_checkpoint_after_retry_after() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let uuid = dispatch(&queue, 20, 150).await;
    let args = ["--tries", "2", "--retry-after", "2", "--timeout", "0"];
    let mut killed = start_worker(redis.url(), &args);
    wait_until(LONG, "five steps are done", || async {
        steps(&mut redis.conn().await, &uuid).await.len() >= 5
    })
    .await;
    killed.kill();
    killed.wait_exit(LONG).await;
    let before = steps(&mut conn, &uuid).await.len();

    let next = start_worker(redis.url(), &args);
    next.wait_for_event(LONG, "the job is done", |e| {
        e.uuid == uuid && e.status == "DONE"
    })
    .await;
    let all = steps(&mut conn, &uuid).await;
    let second: Vec<u64> = all
        .iter()
        .filter(|(_, attempt)| *attempt == 2)
        .map(|(step, _)| *step)
        .collect();
    // The step in flight when the worker was killed may have ended after its last checkpoint:
    // at most that one step runs again.
    let resumed_at = *second.first().expect("the second attempt ran steps");
    assert!(
        resumed_at + 1 >= before as u64 && resumed_at <= before as u64,
        "the second attempt started at step {resumed_at}, {before} having been recorded: {all:?}"
    );
    assert_eq!(second.last(), Some(&19));
    acknowledged_without_checkpoint(&queue, &uuid).await;
}

#[tokio::test]
async fn a_checkpoint_this_version_cannot_read_fails_the_job_saying_so_and_is_deleted() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let uuid = dispatch(&queue, 3, 10).await;
    let key = format!("jobs:checkpoint:{uuid}");
    let _: () = conn
        .set(&key, r#"{"cursor":"from an older version"}"#)
        .await
        .unwrap();
    let worker = start_worker(redis.url(), &["--tries", "1"]);
    worker
        .wait_for_event(LONG, "the job failed", |e| {
            e.uuid == uuid && e.status == "FAILED"
        })
        .await;
    let record = tests::wait_for(LONG, "the failed-job record", || async {
        queue.failed_job(&uuid).await.unwrap()
    })
    .await;
    assert!(
        record
            .exception
            .starts_with("its checkpoint cannot be read by this version of the job"),
        "{}",
        record.exception
    );
    assert!(steps(&mut conn, &uuid).await.is_empty(), "no step ran");
    // The record is written by the step that deletes the checkpoint.
    assert_eq!(checkpoint(&queue, &uuid).await, None);
}

#[tokio::test]
async fn a_synchronous_run_starts_from_a_given_checkpoint_and_reports_the_last_one() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let attempt = redjob_worker::testing::run(Resumable { steps: 5, ms: 0 })
        .from_checkpoint(&3)
        .via(&queue)
        .await;
    assert!(
        attempt.outcome == redjob_worker::testing::Outcome::Done,
        "{attempt:?}"
    );
    assert_eq!(attempt.checkpoint.as_deref(), Some("5"));
    let entries: Vec<String> = conn.lrange(RESUMABLE_KEY, 0, -1).await.unwrap();
    let steps: Vec<u64> = entries
        .iter()
        .map(|entry| {
            serde_json::from_str::<serde_json::Value>(entry).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(steps, [3, 4], "it started at the checkpoint");
    let keys: Vec<String> = conn.keys("jobs:checkpoint:*").await.unwrap();
    assert!(
        keys.is_empty(),
        "a synchronous run keeps its checkpoints in memory: {keys:?}"
    );
}
