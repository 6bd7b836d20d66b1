//! The events a worker reports to its listeners, and the dispatching side's `on_queued`, with a
//! worker run in this process against a real redis-server.

use examples::{Flaky, Guarded, Noop, Panic, RebuildIndex};
use redjob::Bulk;
use redjob_worker::listeners::{Cause, JobEvent, Listener};
use redjob_worker::{Exit, Worker, WorkerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::TestRedis;

/// Every event, as `"<uuid> <event> <detail>"`.
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<String>>>,
    loops: Arc<AtomicUsize>,
}

impl Recorder {
    fn push(&self, job: &JobEvent, what: String) {
        self.events
            .lock()
            .unwrap()
            .push(format!("{} {what}", job.uuid));
    }

    fn of(&self, uuid: uuid::Uuid) -> Vec<String> {
        let prefix = format!("{uuid} ");
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| e.strip_prefix(&prefix).map(str::to_owned))
            .collect()
    }
}

#[redjob::async_trait]
impl Listener for Recorder {
    async fn processing(&self, job: &JobEvent) {
        self.push(job, format!("processing {}", job.attempt));
    }
    async fn processed(&self, job: &JobEvent) {
        self.push(job, "processed".into());
    }
    async fn exception(&self, job: &JobEvent, _error: &str) {
        self.push(job, "exception".into());
    }
    async fn released(&self, job: &JobEvent, _after: Duration, cause: Cause) {
        self.push(job, format!("released {cause:?}"));
    }
    async fn failed(&self, job: &JobEvent, _reason: &str) {
        self.push(job, "failed".into());
    }
    async fn looping(&self) {
        self.loops.fetch_add(1, Ordering::SeqCst);
    }
    async fn stopping(&self, exit: &Exit) {
        self.events
            .lock()
            .unwrap()
            .push(format!("stopping {exit:?}"));
    }
}

/// A listener that panics on every event: the worker goes on.
struct Broken;

#[redjob::async_trait]
impl Listener for Broken {
    async fn processing(&self, _job: &JobEvent) {
        panic!("a broken listener");
    }
}

#[tokio::test]
async fn a_worker_reports_each_attempt_after_it_is_settled_and_its_own_loop_and_stop() {
    let redis = TestRedis::start();
    let queued = Arc::new(Mutex::new(Vec::new()));
    let seen = queued.clone();
    let queue = redis
        .queue()
        .on_queued(move |q| seen.lock().unwrap().push((q.uuid, q.job.to_owned())));
    let mut bulk = Bulk::via(&queue);
    bulk.add(Flaky { fail_times: 1 }.dispatch().tries(2))
        .unwrap();
    bulk.add(Panic {}.dispatch().tries(1)).unwrap();
    bulk.add(
        Guarded {
            skip: true,
            ..Default::default()
        }
        .dispatch(),
    )
    .unwrap();
    bulk.add(Noop {}.dispatch()).unwrap();
    // The second of two unique jobs for one shop is a duplicate.
    for _ in 0..2 {
        let rebuild = RebuildIndex {
            shop: 1,
            ..Default::default()
        };
        bulk.add(rebuild.dispatch()).unwrap();
    }
    let sent = bulk.send().await.unwrap();
    let uuids: Vec<_> = sent.iter().map(|s| s.uuid()).collect();
    assert!(sent[5].is_duplicate());
    let reported: Vec<_> = queued.lock().unwrap().iter().map(|(u, _)| *u).collect();
    assert_eq!(
        reported,
        uuids[..5],
        "every job pushed is reported once; the duplicate is not"
    );

    let recorder = Recorder::default();
    let config = WorkerConfig {
        stop_when_empty: true,
        backoff: redjob::Backoff::new([0]),
        // The test process, not a worker's: its memory is the test harness's.
        memory_mb: 1 << 20,
        ..Default::default()
    };
    let worker = Worker::new(config, queue.clone())
        .unwrap()
        .listen(Broken)
        .listen(recorder.clone());
    let exit = tokio::time::timeout(Duration::from_secs(30), worker.run())
        .await
        .unwrap();
    assert_eq!(exit.unwrap(), Exit::Empty);

    assert_eq!(
        recorder.of(uuids[0]),
        [
            "processing 1",
            "exception",
            "released Exception",
            "processing 2",
            "processed"
        ]
    );
    assert_eq!(
        recorder.of(uuids[1]),
        ["processing 1", "exception", "failed"]
    );
    assert_eq!(recorder.of(uuids[2]), ["processing 1", "processed"]);
    assert_eq!(recorder.of(uuids[3]), ["processing 1", "processed"]);
    assert!(recorder.loops.load(Ordering::SeqCst) > 0);
    let events = recorder.events.lock().unwrap().clone();
    assert_eq!(events.last().unwrap(), "stopping Empty");
}
