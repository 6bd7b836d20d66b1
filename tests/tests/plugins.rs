//! Plugins on the worker's lifecycle: checked before the first job, started with the worker's
//! services in the order given, stopped after the last job settled in the reverse order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use examples::Noop;
use redjob::async_trait;
use redjob_worker::listeners::{JobEvent, Listener};
use redjob_worker::{Exit, Plugin, Worker, WorkerConfig, WorkerError, CONFIG_EXIT_CODE};
use tests::TestRedis;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(30);

/// What happened, in order, as the plugins and the worker's listener saw it.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: impl Into<String>) {
        self.0.lock().unwrap().push(line.into());
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A plugin that logs its start and its stop, and whose check says `refuse` when given.
struct Logged {
    name: &'static str,
    log: Log,
    refuse: Option<&'static str>,
}

#[async_trait]
impl Plugin for Logged {
    fn name(&self) -> String {
        self.name.to_owned()
    }

    async fn check(&self) -> Result<(), String> {
        self.log.push(format!("{} checked", self.name));
        self.refuse.map_or(Ok(()), |why| Err(why.to_owned()))
    }

    async fn run(self: Box<Self>, stop: CancellationToken) {
        self.log.push(format!("{} started", self.name));
        stop.cancelled().await;
        // A plugin's stop may take its time: the worker waits for it.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.log.push(format!("{} stopped", self.name));
    }
}

#[async_trait]
impl Listener for Log {
    async fn processed(&self, job: &JobEvent) {
        self.push(format!("processed {}", job.job));
    }

    async fn stopping(&self, exit: &Exit) {
        self.push(format!("stopping {exit:?}"));
    }
}

fn logged(name: &'static str, log: &Log) -> Logged {
    Logged {
        name,
        log: log.clone(),
        refuse: None,
    }
}

fn config() -> WorkerConfig {
    WorkerConfig {
        stop_when_empty: true,
        // The test process, not a worker's: its memory is the test harness's.
        memory_mb: 1 << 20,
        ..Default::default()
    }
}

#[tokio::test]
async fn plugins_start_in_the_order_given_and_stop_in_the_reverse_after_the_last_job() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    Noop {}.dispatch().via(&queue).await.unwrap();
    let log = Log::default();
    let worker = Worker::new(config(), queue.clone())
        .unwrap()
        .plugin(logged("first", &log))
        .plugin(logged("second", &log))
        .listen(log.clone());
    let exit = tokio::time::timeout(LONG, worker.run()).await.unwrap();
    assert_eq!(exit.unwrap(), Exit::Empty);

    let lines = log.lines();
    let at = |line: &str| {
        lines
            .iter()
            .position(|l| l == line)
            .unwrap_or_else(|| panic!("no {line:?} in {lines:?}"))
    };
    assert!(at("first checked") < at("second checked"), "{lines:?}");
    assert!(at("first started") < at("second started"), "{lines:?}");
    assert!(at("processed noop") < at("second stopped"), "{lines:?}");
    assert!(at("second stopped") < at("first stopped"), "{lines:?}");
    assert!(at("first stopped") < at("stopping Empty"), "{lines:?}");
}

#[tokio::test]
async fn a_plugin_whose_check_fails_refuses_the_start_with_its_name_and_reason() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    Noop {}.dispatch().via(&queue).await.unwrap();
    let log = Log::default();
    let refusing = Logged {
        refuse: Some("its table is missing"),
        ..logged("archiver", &log)
    };
    let worker = Worker::new(config(), queue.clone())
        .unwrap()
        .plugin(refusing)
        .listen(log.clone());
    let err = tokio::time::timeout(LONG, worker.run())
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, WorkerError::Plugin { .. }), "{err:?}");
    assert_eq!(err.exit_code(), CONFIG_EXIT_CODE);
    assert_eq!(err.to_string(), "archiver: its table is missing");
    assert_eq!(
        log.lines(),
        ["archiver checked"],
        "nothing started, no job ran"
    );
    assert_eq!(queue.size("default").await.unwrap().total(), 1);
}
