//! Set-ups several test files share: jobs dispatched and a worker run over them, on one server
//! or a cluster ([`RedisUnderTest`]). `worker` is the worker binary
//! (`env!("CARGO_BIN_EXE_test_worker")` in an integration test).

use examples::{Noop, Panic};
use redjob::Payload;
use std::time::Duration;

use crate::worker_process::WorkerProcess;
use crate::{RedisUnderTest, SentVia};

/// How long a scenario's worker may take.
const LONG: Duration = Duration::from_secs(30);

/// Dispatches a panicking job to each queue given, runs a worker (queues in the order given)
/// until they have all failed, and returns their uuids in dispatch order.
pub async fn failed_jobs_on(
    worker: &str,
    redis: &impl RedisUnderTest,
    queues: &[&str],
) -> Vec<String> {
    let queue = redis.queue();
    let mut uuids = Vec::new();
    for name in queues {
        let uuid = Panic {}.dispatch().on_queue(*name).sent_via(&queue).await;
        uuids.push(uuid.to_string());
    }
    let mut names: Vec<&str> = queues.to_vec();
    names.dedup();
    let list = names.join(",");
    // One at a time, so that they fail in dispatch order within a queue.
    let args = ["--queue", &list, "--concurrency", "1", "--stop-when-empty"];
    let mut worker = WorkerProcess::start(worker, redis.url(), &args);
    assert!(worker.wait_exit(LONG).await.success());
    uuids
}

/// Starts a worker named `billing` on queues `q1,q2` at concurrency 3, waits until it runs,
/// and dispatches three no-op jobs to `q1` and a panicking one to `q2`.
pub async fn billing_worker_with_four_jobs(
    worker: &str,
    redis: &impl RedisUnderTest,
) -> WorkerProcess {
    let queue = redis.queue();
    let args = [
        "--queue",
        "q1,q2",
        "--concurrency",
        "3",
        "--name",
        "billing",
    ];
    let worker = WorkerProcess::start(worker, redis.url(), &args);
    worker.wait_started().await;
    for _ in 0..3 {
        Noop {}.dispatch().on_queue("q1").sent_via(&queue).await;
    }
    Panic {}.dispatch().on_queue("q2").sent_via(&queue).await;
    worker
}

/// Puts a no-op job at the head of the ready list of `queue`, where a job dispatched
/// `age_secs` ago would be, with its `createdAt` set back that far by Redis's clock and no
/// wake-up token; returns its uuid.
pub async fn old_ready_job(redis: &impl RedisUnderTest, queue: &str, age_secs: u64) -> String {
    let handle = redis.queue();
    let mut conn = handle.connection();
    let envelope = Noop {}
        .dispatch()
        .on_queue(queue)
        .envelope()
        .expect("a no-op job's envelope");
    let payload = Payload::from_json(&envelope.payload).expect("a payload");
    let created = payload.created_at.expect("a payload with createdAt");
    let (now, _): (i64, i64) = redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .expect("TIME answers");
    let old = now - age_secs as i64;
    let raw = envelope.payload.replacen(
        &format!("\"createdAt\":{created}"),
        &format!("\"createdAt\":{old}"),
        1,
    );
    assert_ne!(raw, envelope.payload, "createdAt was not found to set back");
    let _: () = redis::cmd("LPUSH")
        .arg(handle.queue_keys(queue).ready)
        .arg(raw)
        .query_async(&mut conn)
        .await
        .expect("LPUSH answers");
    payload.uuid.to_string()
}
