//! Batches against a real redis-server and worker processes: every job counted once in the
//! step that settles it, `then`, `catch` and `finally` pushed once each, cancellation skipping
//! the jobs not started, jobs added from inside the batch, chains as jobs of a batch.

use examples::{Caught, Step};
use redis::AsyncCommands;
use redjob::__worker::Settlement;
use redjob::queue::keys::QueueKeys;
use redjob::workflow::{Batch, BatchStatus, Chain};
use redjob::{FailedJob, Payload, RedisQueue};
use std::time::Duration;
use tests::protocol::WorkerCalls;
use tests::worker_process::WorkerProcess;
use tests::{wait_for, wait_until, TestRedis};
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// The labels recorded so far, in the order the steps finished.
async fn labels(redis: &TestRedis) -> Vec<String> {
    tests::steps::recorded_labels(&mut redis.conn().await).await
}

fn count(labels: &[String], label: &str) -> usize {
    labels.iter().filter(|l| *l == label).count()
}

/// Waits until the batch is finished, and returns it.
async fn finished(queue: &RedisQueue, id: Uuid) -> BatchStatus {
    wait_for(LONG, "the batch finishes", || async {
        queue.batch(id).await.unwrap().filter(BatchStatus::finished)
    })
    .await
}

/// Waits until `label` is recorded, then a little longer, and returns every label: a
/// callback pushed twice would show by then.
async fn settled_with(redis: &TestRedis, label: &str) -> Vec<String> {
    wait_until(LONG, format!("{label} recorded"), || async {
        labels(redis).await.iter().any(|l| l == label)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    labels(redis).await
}

/// Reserves the next job of `keys`' queue, as a worker would: its reserved copy and its uuid.
async fn pop_one(queue: &RedisQueue, keys: &QueueKeys) -> (String, Uuid) {
    let popped = queue.pop(keys, LONG, 1, 10).await.unwrap();
    let reserved = popped.jobs[0].clone();
    let uuid = Payload::from_json(&reserved).unwrap().uuid;
    (reserved, uuid)
}

/// What settling the job `job` of the batch `id`, which added no jobs, changes in the batch.
fn in_batch(id: Uuid, job: Uuid) -> Settlement {
    Settlement::from(redjob::workflow::BatchProgress::new(id, job))
}

/// Puts a reserved job back at the head of `default`, as an expired reservation or a retry by
/// hand delivers it again.
async fn deliver_again(redis: &TestRedis, reserved: &str) {
    let _: () = redis
        .conn()
        .await
        .lpush(
            "queues:default",
            redjob::payload::unreserved(reserved).as_ref(),
        )
        .await
        .unwrap();
}

/// Dispatches `batch` with a [`Step`] job per label, on `default`; returns its id.
async fn steps_in(queue: &RedisQueue, batch: Batch, labels: &[&str]) -> Uuid {
    let jobs = labels.iter().map(|label| Step::new(*label).dispatch());
    batch.jobs(jobs).via(queue).dispatch().await.unwrap()
}

fn callbacks() -> Batch {
    Batch::new()
        .then(
            Caught {
                label: "then".into(),
            }
            .dispatch(),
        )
        .catch(
            Caught {
                label: "catch".into(),
            }
            .dispatch(),
        )
        .finally(
            Caught {
                label: "finally".into(),
            }
            .dispatch(),
        )
}

#[tokio::test]
async fn a_batch_of_mixed_jobs_is_pushed_in_order_each_where_it_goes() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // Ready jobs on two queues in turn, a delayed one and a grouped one between them: each
    // list keeps its jobs in dispatch order, and every job is joined once.
    let step = |label: &str, on: &str| Step::new(label).dispatch().on_queue(on);
    let id = Batch::new()
        .job(step("a1", "ma"))
        .job(step("a2", "ma"))
        .job(step("b1", "mb"))
        .job(step("later", "ma").delay(60))
        .job(step("a3", "ma"))
        .job(step("grouped", "ma").group("g1"))
        .job(step("a4", "ma"))
        .job(step("b2", "mb"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    let mut conn = redis.conn().await;
    let labels_in = |payloads: Vec<String>| -> Vec<String> {
        payloads
            .iter()
            .map(|p| {
                let payload = Payload::from_json(p).unwrap();
                assert_eq!(payload.batch, Some(id));
                let step: Step = serde_json::from_str(payload.data.get()).unwrap();
                step.label
            })
            .collect()
    };
    let ma: Vec<String> = conn.lrange("queues:ma", 0, -1).await.unwrap();
    let mb: Vec<String> = conn.lrange("queues:mb", 0, -1).await.unwrap();
    let delayed: Vec<String> = conn.zrange("queues:ma:delayed", 0, -1).await.unwrap();
    let grouped: Vec<String> = conn.lrange("queues:ma:g:g1", 0, -1).await.unwrap();
    assert_eq!(labels_in(ma), ["a1", "a2", "a3", "a4"]);
    assert_eq!(labels_in(mb), ["b1", "b2"]);
    assert_eq!(labels_in(delayed), ["later"]);
    assert_eq!(labels_in(grouped), ["grouped"]);
    // One wake-up token per ready job, grouped ones included, and one for the delayed job,
    // the queue's earliest, to re-arm an idle worker's timer.
    let tokens_a: i64 = conn.llen("queues:ma:notify").await.unwrap();
    let tokens_b: i64 = conn.llen("queues:mb:notify").await.unwrap();
    assert_eq!((tokens_a, tokens_b), (6, 2));
    let pending: i64 = conn
        .scard(format!("jobs:batch:{id}:pending"))
        .await
        .unwrap();
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!((status.total, status.pending, pending), (8, 8, 8));
}

#[tokio::test]
async fn every_job_is_counted_once_and_then_and_finally_are_pushed_once() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = callbacks()
        .name("import 42")
        .jobs((0..1500).map(|n| Step::new(format!("row{n}")).dispatch()))
        .on_queue("imports")
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    // The record counts every job, pushed in two parts; each payload names its batch.
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!(
        (status.name.as_str(), status.total, status.pending),
        ("import 42", 1500, 1500)
    );
    assert_eq!(status.progress(), 0);
    assert!(!status.finished() && !status.cancelled());
    let mut conn = redis.conn().await;
    let first: String = conn.lindex("queues:imports", 0).await.unwrap();
    assert_eq!(Payload::from_json(&first).unwrap().batch, Some(id));
    assert_eq!(queue.size("imports").await.unwrap().ready, 1500);

    let _worker = start_worker(redis.url(), &["--queue", "imports", "--concurrency", "20"]);
    let status = finished(&queue, id).await;
    assert_eq!((status.total, status.pending, status.failed), (1500, 0, 0));
    assert_eq!(status.progress(), 100);
    let labels = settled_with(&redis, "caught:finally").await;
    assert_eq!(count(&labels, "caught:then"), 1);
    assert_eq!(count(&labels, "caught:finally"), 1);
    assert_eq!(count(&labels, "caught:catch"), 0);
    assert_eq!(labels.len(), 1502);
    // A finished batch's keys expire.
    let ttl: i64 = conn.ttl(format!("jobs:batch:{id}")).await.unwrap();
    assert!(ttl > 6 * 24 * 3600, "kept for a week: {ttl}");
}

#[tokio::test]
async fn the_first_failure_pushes_catch_once_and_cancels_the_rest() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let failing = Step {
        label: "bad".into(),
        fail: true,
        ..Step::default()
    };
    let id = callbacks()
        .job(failing.dispatch())
        .jobs((0..10).map(|n| Step::new(format!("row{n}")).dispatch()))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // One at a time: the failing job runs first, and cancels the batch.
    let _worker = start_worker(redis.url(), &["--concurrency", "1"]);
    let status = finished(&queue, id).await;
    assert!(status.cancelled());
    assert_eq!((status.total, status.pending, status.failed), (11, 0, 1));
    let labels = settled_with(&redis, "caught:finally").await;
    assert_eq!(
        labels,
        ["bad", "caught:catch", "caught:finally"],
        "the rest were skipped"
    );
    let failed: Vec<String> = redis
        .conn()
        .await
        .zrange(format!("jobs:batch:{id}:failed"), 0, -1)
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
}

#[tokio::test]
async fn a_batch_that_allows_failures_runs_every_job_and_skips_then() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let failing = |label: &str| Step {
        label: label.into(),
        fail: true,
        ..Step::default()
    };
    let id = callbacks()
        .job(failing("bad1").dispatch())
        .jobs((0..8).map(|n| Step::new(format!("row{n}")).dispatch()))
        .job(failing("bad2").dispatch())
        .allow_failures()
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let _worker = start_worker(redis.url(), &["--concurrency", "1"]);
    let status = finished(&queue, id).await;
    assert!(!status.cancelled());
    assert_eq!((status.total, status.pending, status.failed), (10, 0, 2));
    let labels = settled_with(&redis, "caught:finally").await;
    assert_eq!(
        count(&labels, "caught:catch"),
        1,
        "catch at the first failure only"
    );
    assert_eq!(count(&labels, "caught:then"), 0, "not every job succeeded");
    assert_eq!(labels.len(), 10 + 2);
}

#[tokio::test]
async fn cancelling_a_batch_skips_the_jobs_not_started() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = callbacks()
        .jobs((0..5).map(|n| Step::new(format!("row{n}")).dispatch()))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    assert!(queue.cancel_batch(id).await.unwrap());
    assert!(!queue.cancel_batch(id).await.unwrap(), "cancelled once");
    let _worker = start_worker(redis.url(), &[]);
    let status = finished(&queue, id).await;
    assert_eq!((status.total, status.pending, status.failed), (5, 0, 0));
    let labels = settled_with(&redis, "caught:finally").await;
    assert_eq!(labels, ["caught:finally"], "no job ran, no then");
    // A finished or cancelled batch takes no more jobs.
    let refused = queue
        .add_to_batch(id, [Step::new("late").dispatch()])
        .await
        .unwrap();
    assert!(!refused);
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test]
async fn jobs_added_from_inside_the_batch_are_counted_before_it_can_finish() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let spawning = Step {
        label: "parent".into(),
        add_to_batch: vec!["child1".into(), "child2".into()],
        ..Step::default()
    };
    let id = callbacks()
        .job(spawning.dispatch())
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let added = queue
        .add_to_batch(id, [Step::new("outside").dispatch()])
        .await
        .unwrap();
    assert!(added, "a running batch takes jobs from outside too");
    let _worker = start_worker(redis.url(), &["--concurrency", "1"]);
    let status = finished(&queue, id).await;
    assert_eq!((status.total, status.pending, status.failed), (4, 0, 0));
    let labels = settled_with(&redis, "caught:finally").await;
    let mut jobs: Vec<&str> = labels
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("caught"))
        .collect();
    jobs.sort();
    assert_eq!(jobs, ["child1", "child2", "outside", "parent"]);
    assert_eq!(count(&labels, "caught:then"), 1);
    let then_at = labels.iter().position(|l| l == "caught:then").unwrap();
    assert_eq!(then_at, 4, "then came after every job: {labels:?}");
}

#[tokio::test]
async fn chains_in_a_batch_count_each_link_and_a_failed_link_takes_the_rest_out() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let failing = Step {
        label: "b2".into(),
        fail: true,
        ..Step::default()
    };
    let id = callbacks()
        .chain(
            Chain::new(Step::new("a1").dispatch())
                .then(Step::new("a2").dispatch())
                .then(Step::new("a3").dispatch()),
        )
        .chain(
            Chain::new(Step::new("b1").dispatch())
                .then(failing.dispatch())
                .then(Step::new("b3").dispatch()),
        )
        .allow_failures()
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    assert_eq!(
        queue.batch(id).await.unwrap().unwrap().total,
        6,
        "every link counts"
    );
    let _worker = start_worker(redis.url(), &["--concurrency", "4"]);
    let status = finished(&queue, id).await;
    assert_eq!(
        (status.total, status.pending, status.failed),
        (5, 0, 1),
        "b3 left"
    );
    let labels = settled_with(&redis, "caught:finally").await;
    let a: Vec<&String> = labels.iter().filter(|l| l.starts_with('a')).collect();
    assert_eq!(a, ["a1", "a2", "a3"]);
    assert_eq!(count(&labels, "b3"), 0);
    assert_eq!(count(&labels, "caught:catch"), 1);
    assert_eq!(count(&labels, "caught:then"), 0);
}

#[tokio::test]
async fn an_empty_batch_finishes_at_once() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = callbacks().via(&queue).dispatch().await.unwrap();
    let status = queue.batch(id).await.unwrap().unwrap();
    assert!(status.finished());
    assert_eq!(status.progress(), 100);
    let mut conn = redis.conn().await;
    let ready: Vec<String> = conn.lrange("queues:default", 0, -1).await.unwrap();
    let jobs: Vec<String> = ready
        .iter()
        .map(|p| Payload::from_json(p).unwrap().job)
        .collect();
    assert_eq!(jobs, ["caught", "caught"], "then and finally");
}

#[tokio::test]
async fn a_worker_stopping_when_empty_runs_the_callbacks_its_last_acknowledgement_pushes() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // The batch's last acknowledgement pushes `then` and `finally`: the queue is empty for
    // a moment after the last job's handler returns. Several batches in turn, each with a
    // worker of its own, as a worker is often started on a batch in scripts and crons.
    for round in 0..5 {
        let id = callbacks()
            .jobs((0..3).map(|n| Step::new(format!("row{round}.{n}")).dispatch()))
            .via(&queue)
            .dispatch()
            .await
            .unwrap();
        let mut worker = start_worker(redis.url(), &["--stop-when-empty"]);
        assert!(worker.wait_exit(LONG).await.success());
        let status = queue.batch(id).await.unwrap().unwrap();
        assert!(status.finished(), "round {round}: {status:?}");
        let size = queue.size("default").await.unwrap();
        assert_eq!(
            (size.ready, size.reserved),
            (0, 0),
            "round {round}: the worker ran every job the batch pushed before it stopped"
        );
    }
    let labels = labels(&redis).await;
    assert_eq!(count(&labels, "caught:then"), 5, "{labels:?}");
    assert_eq!(count(&labels, "caught:finally"), 5, "{labels:?}");
}

#[tokio::test]
async fn a_job_that_runs_twice_is_counted_once() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = Batch::new()
        .then(
            Caught {
                label: "then".into(),
            }
            .dispatch(),
        )
        .job(Step::new("one").dispatch())
        .job(Step::new("two").dispatch())
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let keys = queue.queue_keys("default");
    let (reserved, uuid) = pop_one(&queue, &keys).await;
    assert!(queue
        .complete(&keys, &reserved, &in_batch(id, uuid))
        .await
        .unwrap());
    // The same job delivered again (its reservation had expired, say) and finished again.
    deliver_again(&redis, &reserved).await;
    let (again, again_uuid) = pop_one(&queue, &keys).await;
    assert_eq!(again_uuid, uuid);
    assert!(queue
        .complete(&keys, &again, &in_batch(id, uuid))
        .await
        .unwrap());
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!((status.total, status.pending), (2, 1), "counted once");
    assert!(!status.finished(), "then is not pushed early");
    assert_eq!(
        queue.size("default").await.unwrap().ready,
        1,
        "only the other job waits"
    );
}

/// The acker's step for many jobs of a batch at once counts each job once by its uuid, held
/// or not (a job whose reservation lapsed still ran to its end), and a run of it again counts
/// nothing; a failed job retried by hand that succeeds leaves the failed count.
#[tokio::test]
async fn jobs_acknowledged_together_are_counted_once_each() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = steps_in(
        &queue,
        Batch::new().allow_failures().then(
            Caught {
                label: "then".into(),
            }
            .dispatch(),
        ),
        &["a", "b", "c"],
    )
    .await;
    let keys = queue.queue_keys("default");
    let a = pop_one(&queue, &keys).await;
    let b = pop_one(&queue, &keys).await;
    let c = pop_one(&queue, &keys).await;

    // c fails for good, then is retried by hand.
    let record = FailedJob::new(c.1.to_string(), "redis", "default", c.0.clone(), "boom");
    assert!(queue
        .fail_with(&keys, c.0.as_bytes(), &record, &in_batch(id, c.1))
        .await
        .unwrap());
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!((status.pending, status.failed), (2, 1));
    deliver_again(&redis, &c.0).await;
    let c_again = pop_one(&queue, &keys).await;
    // a's reservation lapsed, and the migration of expired reservations put its copy back as
    // it was: another worker runs it now, one attempt later.
    assert!(queue.delete(&keys, &a.0).await.unwrap());
    let _: () = redis
        .conn()
        .await
        .lpush("queues:default", &a.0)
        .await
        .unwrap();
    let a_again = pop_one(&queue, &keys).await;
    assert_eq!(a_again.1, a.1);
    assert_ne!(a_again.0, a.0);

    let finished = [
        (a.0.as_str(), a.1),
        (b.0.as_str(), b.1),
        (c_again.0.as_str(), c_again.1),
        (b.0.as_str(), b.1),
    ];
    let held = queue.complete_in_batch(&keys, id, &finished).await.unwrap();
    assert_eq!(
        held, 2,
        "b and the retried c were held; a was not, and b counts once"
    );
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!(
        (status.total, status.pending, status.failed),
        (3, 0, 0),
        "a ran to its end and is counted; the retried c left the failed count"
    );
    assert!(status.finished());
    assert_eq!(queue.size("default").await.unwrap().ready, 1, "then");

    // a's other run finishes too: nothing more is counted or pushed.
    let held = queue
        .complete_in_batch(&keys, id, &[(a_again.0.as_str(), a_again.1)])
        .await
        .unwrap();
    assert_eq!(held, 1);
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!((status.total, status.pending, status.failed), (3, 0, 0));
    let size = queue.size("default").await.unwrap();
    assert_eq!((size.ready, size.reserved), (1, 0), "then is pushed once");
}

/// An acknowledgement that leaves jobs pending counts its jobs, as every reader of the batch
/// sees at once, and pushes no callback: the batch's step ends early while any job is pending.
#[tokio::test]
async fn an_acknowledgement_that_leaves_jobs_pending_counts_them_and_calls_nothing_back() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = steps_in(&queue, callbacks().name("partial"), &["a", "b", "c"]).await;
    let keys = queue.queue_keys("default");
    let a = pop_one(&queue, &keys).await;
    let b = pop_one(&queue, &keys).await;
    let held = queue
        .complete_in_batch(&keys, id, &[(a.0.as_str(), a.1), (b.0.as_str(), b.1)])
        .await
        .unwrap();
    assert_eq!(held, 2);
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!((status.total, status.pending, status.failed), (3, 1, 0));
    assert!(!status.finished(), "{status:?}");
    let admin = redjob::admin::Admin::new(queue.clone());
    let listed = admin
        .batches_page(&Default::default(), None, 10)
        .await
        .unwrap();
    assert_eq!(
        listed.batches,
        std::slice::from_ref(&status),
        "the listing reads the same counts"
    );
    let running = admin.pending_batches().await.unwrap();
    assert_eq!((running.batches, running.jobs), (1, 1));
    let size = queue.size("default").await.unwrap();
    assert_eq!(
        (size.ready, size.reserved),
        (1, 0),
        "c alone: no callback yet"
    );

    let c = pop_one(&queue, &keys).await;
    queue
        .complete_in_batch(&keys, id, &[(c.0.as_str(), c.1)])
        .await
        .unwrap();
    let status = queue.batch(id).await.unwrap().unwrap();
    assert_eq!((status.pending, status.failed), (0, 0));
    assert!(status.finished(), "{status:?}");
    let running = admin.pending_batches().await.unwrap();
    assert_eq!((running.batches, running.jobs), (0, 0));
    let size = queue.size("default").await.unwrap();
    assert_eq!((size.ready, size.reserved), (2, 0), "then and finally");
}

/// The pending-batch gauges read the index of running batches, not every batch kept: a batch
/// that finished leaves it at the next read, as does one whose record is gone; the running
/// batches of a store no version indexed yet (an earlier version's) are added to it once.
#[tokio::test]
async fn the_pending_batch_gauges_read_the_running_batches_alone() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let admin = redjob::admin::Admin::new(queue.clone());
    let mut conn = redis.conn().await;
    let (running, indexed) = ("jobs:batches:running", "jobs:batches:running:indexed");
    let keys = queue.queue_keys("default");
    let done = steps_in(&queue, Batch::new(), &["a"]).await;
    let a = pop_one(&queue, &keys).await;
    queue
        .complete_in_batch(&keys, done, &[(a.0.as_str(), a.1)])
        .await
        .unwrap();
    let gone = steps_in(&queue, Batch::new(), &["b"]).await;
    let _: () = conn.del(format!("jobs:batch:{gone}")).await.unwrap();
    let open = steps_in(&queue, Batch::new(), &["c", "d"]).await;
    let members: Vec<String> = conn.zrange(running, 0, -1).await.unwrap();
    assert_eq!(
        members.len(),
        3,
        "every batch is indexed as running when created"
    );

    let pending = admin.pending_batches().await.unwrap();
    assert_eq!((pending.batches, pending.jobs), (1, 2));
    let members: Vec<String> = conn.zrange(running, 0, -1).await.unwrap();
    assert_eq!(
        members,
        [open.to_string()],
        "the finished and the gone left it"
    );

    // A store an earlier version wrote: batches, but no index of running ones.
    let _: () = conn.del(&[running, indexed]).await.unwrap();
    let pending = admin.pending_batches().await.unwrap();
    assert_eq!((pending.batches, pending.jobs), (1, 2));
    let members: Vec<String> = conn.zrange(running, 0, -1).await.unwrap();
    assert_eq!(members, [open.to_string()]);
    assert!(conn.exists::<_, bool>(indexed).await.unwrap());

    // Indexed once: a batch missing from the index is not looked for among all kept.
    let _: () = conn.del(running).await.unwrap();
    let pending = admin.pending_batches().await.unwrap();
    assert_eq!((pending.batches, pending.jobs), (0, 0));
}

/// A listing of running batches reads the index of those, and drops the finished batches it
/// meets there: once a listing has passed them, the one running batch, older than a hundred
/// finished ones, is on the first page even with no time budget, where a walk through every
/// batch kept stops after its first 50.
#[tokio::test]
async fn a_listing_of_running_batches_skips_the_finished_ones() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let open = steps_in(&queue, Batch::new().name("open"), &["a"]).await;
    for _ in 0..120 {
        Batch::new().via(&queue).dispatch().await.unwrap();
    }
    let running = redjob::admin::BatchFilter {
        state: Some(redjob::admin::BatchState::Running),
        ..Default::default()
    };
    let admin = redjob::admin::Admin::new(queue.clone());
    let listed = admin.batches_page(&running, None, 10).await.unwrap();
    let ids: Vec<Uuid> = listed.batches.iter().map(|b| b.id).collect();
    assert_eq!((ids, listed.next), (vec![open], None));
    let indexed: usize = redis
        .conn()
        .await
        .zcard("jobs:batches:running")
        .await
        .unwrap();
    assert_eq!(
        indexed, 1,
        "the finished batches left the index of running ones"
    );

    let hurried = admin.with_page_budget(Duration::ZERO);
    let listed = hurried.batches_page(&running, None, 10).await.unwrap();
    let ids: Vec<Uuid> = listed.batches.iter().map(|b| b.id).collect();
    assert_eq!((ids, listed.next), (vec![open], None));
    let everything = hurried
        .batches_page(&Default::default(), None, 500)
        .await
        .unwrap();
    assert_eq!(everything.batches.len(), 50, "one step of the walk");
    assert!(everything.next.is_some());
}

/// A server that lost its scripts (a restart with its data kept, or `SCRIPT FLUSH`) between
/// two acknowledgements of a batch's jobs: the jobs are counted, and the batch's step is taken
/// all the same, its callbacks pushed once.
#[tokio::test]
async fn a_batch_acknowledgement_after_the_server_lost_its_scripts_still_finishes_the_batch() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = steps_in(&queue, callbacks(), &["a", "b"]).await;
    let keys = queue.queue_keys("default");
    let a = pop_one(&queue, &keys).await;
    let b = pop_one(&queue, &keys).await;
    let held = queue
        .complete_in_batch(&keys, id, &[(a.0.as_str(), a.1)])
        .await
        .unwrap();
    assert_eq!(held, 1);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis.conn().await)
        .await
        .unwrap();
    let held = queue
        .complete_in_batch(&keys, id, &[(b.0.as_str(), b.1)])
        .await
        .unwrap();
    assert_eq!(held, 1);
    let status = queue.batch(id).await.unwrap().unwrap();
    assert!(status.finished(), "{status:?}");
    assert_eq!((status.pending, status.failed), (0, 0));
    let size = queue.size("default").await.unwrap();
    assert_eq!(
        (size.ready, size.reserved),
        (2, 0),
        "then and finally, once each"
    );
}

#[tokio::test]
async fn operators_list_show_cancel_retry_and_prune_batches() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let jobsctl =
        tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let failing = Step {
        label: "bad".into(),
        fail: true,
        ..Step::default()
    };
    let done = Batch::new()
        .name("nightly import")
        .job(failing.dispatch())
        .job(Step::new("good").dispatch())
        .allow_failures()
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let mut worker = start_worker(redis.url(), &["--concurrency", "1", "--stop-when-empty"]);
    assert!(worker.wait_exit(LONG).await.success());
    // A second batch waits on a queue no worker serves.
    let waiting = Batch::new()
        .name("waiting")
        .jobs((0..3).map(|n| Step::new(format!("w{n}")).dispatch().on_queue("idle")))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    let listed = jobsctl.json(&["batches"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], waiting.to_string(), "newest first");
    assert_eq!(
        (listed[0]["total"].as_u64(), listed[0]["pending"].as_u64()),
        (Some(3), Some(3))
    );
    let table = jobsctl.run(&["batches"]);
    assert!(
        table.stdout.contains("nightly import") && table.stdout.contains("finished with failures"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("running"), "{}", table.stdout);

    let shown = jobsctl.json(&["batches", "show", &done.to_string()]);
    assert_eq!(shown["failed"], 1);
    let failed_uuid = shown["failed_jobs"][0].as_str().unwrap().to_owned();
    assert_eq!(queue.failed_jobs(10).await.unwrap()[0].uuid, failed_uuid);
    let text = jobsctl.run(&["batches", "show", &done.to_string()]).stdout;
    assert!(
        text.contains("Progress:  100%") && text.contains(&failed_uuid),
        "{text}"
    );

    // Retrying the failed jobs pushes them back onto their queue.
    let retried = jobsctl.json(&["batches", "retry", &done.to_string()]);
    assert_eq!(retried["retried"][0]["uuid"], failed_uuid);
    assert_eq!(queue.size("default").await.unwrap().ready, 1);

    let cancelled = jobsctl.run(&["batches", "cancel", &waiting.to_string()]);
    assert_eq!(cancelled.code(), Some(0), "{}", cancelled.stderr);
    assert!(queue.batch(waiting).await.unwrap().unwrap().cancelled());
    let missing = jobsctl.run(&["batches", "show", "0e0e0e0e-0000-0000-0000-000000000000"]);
    assert_eq!(missing.code(), Some(1));
    assert!(missing.stderr.contains("no batch"), "{}", missing.stderr);
    let missing = jobsctl.run(&["batches", "cancel", "0e0e0e0e-0000-0000-0000-000000000000"]);
    assert_eq!(missing.code(), Some(1));
    assert!(missing.stderr.contains("no batch"), "{}", missing.stderr);

    // Pruning deletes finished batches older than the cutoff, and leaves running ones.
    let kept = jobsctl.json(&["batches", "prune", "--hours", "1"]);
    assert_eq!(kept["pruned"].as_array().unwrap().len(), 0);
    let pruned = jobsctl.json(&["batches", "prune", "--hours", "0"]);
    assert_eq!(pruned["pruned"], serde_json::json!([done.to_string()]));
    assert!(queue.batch(done).await.unwrap().is_none());
    let mut conn = redis.conn().await;
    let left: Vec<String> = conn.keys(format!("jobs:batch:{done}*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    for index in ["jobs:batches", "jobs:batches:running"] {
        let rank: Option<usize> = conn.zrank(index, done.to_string()).await.unwrap();
        assert_eq!(rank, None, "{index} still names the pruned batch");
    }
    assert_eq!(jobsctl.json(&["batches"]).as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn links_a_chain_of_the_batch_adds_join_the_batch() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let appending = Step {
        label: "c1".into(),
        append: vec!["c-appended".into()],
        ..Step::default()
    };
    let id = callbacks()
        .chain(Chain::new(appending.dispatch()).then(Step::new("c2").dispatch()))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let _worker = start_worker(redis.url(), &["--concurrency", "2"]);
    let status = finished(&queue, id).await;
    assert_eq!((status.total, status.pending, status.failed), (3, 0, 0));
    let labels = settled_with(&redis, "caught:finally").await;
    let at = |l: &str| labels.iter().position(|x| x == l).unwrap();
    assert!(
        at("c1") < at("c2") && at("c2") < at("c-appended"),
        "{labels:?}"
    );
    assert!(
        at("c-appended") < at("caught:then"),
        "then after the appended link: {labels:?}"
    );
}
