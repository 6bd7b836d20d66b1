//! Application state and embedded workers against a real redis-server: state declared by a
//! job type reaches its handler in a worker, a synchronous run and the inline fake; a worker
//! without it refuses to start; an embedded worker stops on its host's signal, dispatches
//! through its own handle, and outlives a handler that blocks its thread.

use examples::Block;
use redjob::{job, FailedContext, Job, JobContext, JobResult, RedisQueue};
use redjob_worker::testing::{self, Outcome};
use redjob_worker::{Exit, OnBlocked, Worker, WorkerConfig, WorkerError};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::{wait_for, wait_until, TestRedis};

const LONG: Duration = Duration::from_secs(30);

/// The state the jobs here read: a greeting, and where the handlers write what they said.
#[derive(Clone, Default)]
struct Greeter {
    greeting: &'static str,
    said: Arc<Mutex<Vec<String>>>,
}

impl Greeter {
    fn new(greeting: &'static str) -> Greeter {
        Greeter {
            greeting,
            ..Greeter::default()
        }
    }

    fn said(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }
}

#[derive(Serialize, Deserialize)]
struct Greet {
    name: String,
}

#[job(name = "state.greet", state = Greeter)]
impl Job for Greet {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let greeter = ctx.state::<Greeter>();
        let line = format!("{}, {}", greeter.greeting, self.name);
        greeter.said.lock().unwrap().push(line);
        Ok(())
    }
}

/// Fails for good; its `failed()` hook reports through the state.
#[derive(Serialize, Deserialize)]
struct Grumble {}

#[job(name = "state.grumble", state = Greeter, tries = 1)]
impl Job for Grumble {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Err("no greeting today".into())
    }

    async fn failed(&self, ctx: &FailedContext) {
        let greeter = ctx.state::<Greeter>();
        let line = format!("{}, grumble failed: {}", greeter.greeting, ctx.reason());
        greeter.said.lock().unwrap().push(line);
    }
}

/// Reads state it does not declare.
#[derive(Serialize, Deserialize)]
struct Sneaky {}

#[job(name = "state.sneaky")]
impl Job for Sneaky {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        ctx.state::<Greeter>();
        Ok(())
    }
}

/// Dispatches a greeting without naming a handle.
#[derive(Serialize, Deserialize)]
struct Relay {
    name: String,
}

#[job(name = "state.relay")]
impl Job for Relay {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Greet {
            name: self.name.clone(),
        }
        .dispatch()
        .on_queue("relayed")
        .await?;
        Ok(())
    }
}

fn config(queues: &[&str]) -> WorkerConfig {
    WorkerConfig {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        sleep: Duration::from_millis(100),
        ..WorkerConfig::default()
    }
}

#[tokio::test]
async fn a_worker_without_the_state_a_job_declares_refuses_to_start_and_takes_nothing() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    Greet { name: "ann".into() }
        .dispatch()
        .via(&queue)
        .await
        .unwrap();

    let worker = Worker::new(config(&["default"]), queue.clone()).unwrap();
    let err = worker.run().await.unwrap_err();
    let WorkerError::MissingState(missing) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(missing.len(), 2, "Greet and Grumble: {missing:?}");
    let message = err.to_string();
    for named in [
        "state.greet",
        "app_state::Greet",
        "state.grumble",
        "app_state::Greeter",
        ".state(",
    ] {
        assert!(message.contains(named), "{message}");
    }
    assert_eq!(err.exit_code(), redjob_worker::CONFIG_EXIT_CODE);
    assert_eq!(
        queue.size("default").await.unwrap().ready,
        1,
        "nothing taken"
    );

    // Two values of one type are refused too.
    let twice = Worker::new(config(&["default"]), queue.clone())
        .unwrap()
        .state(Greeter::new("hi"))
        .state(Greeter::new("hello"));
    let err = twice.run().await.unwrap_err();
    assert!(matches!(err, WorkerError::DuplicateState(_)), "{err:?}");
    assert!(err.to_string().contains("Greeter"), "{err}");
    assert_eq!(
        queue.size("default").await.unwrap().ready,
        1,
        "nothing taken"
    );
}

#[tokio::test]
async fn state_reaches_handlers_and_failed_hooks_in_a_worker_a_synchronous_run_and_the_inline_fake()
{
    let redis = TestRedis::start();
    let queue = redis.queue();
    for name in ["ann", "bob"] {
        Greet { name: name.into() }
            .dispatch()
            .via(&queue)
            .await
            .unwrap();
    }
    Grumble {}.dispatch().via(&queue).await.unwrap();
    let greeter = Greeter::new("hello");
    let worker = Worker::new(
        WorkerConfig {
            stop_when_empty: true,
            ..config(&["default"])
        },
        queue.clone(),
    )
    .unwrap()
    .state(greeter.clone());
    let exit = tokio::time::timeout(LONG, worker.run()).await.unwrap();
    assert_eq!(exit.unwrap(), Exit::Empty);
    let mut said = greeter.said();
    said.sort();
    assert_eq!(
        said,
        [
            "hello, ann",
            "hello, bob",
            "hello, grumble failed: no greeting today"
        ]
    );

    // A synchronous run, with a stub of the test's own.
    let stub = Greeter::new("hi");
    let attempt = testing::run(Greet { name: "cy".into() })
        .state(stub.clone())
        .await;
    assert_eq!(attempt.outcome, Outcome::Done);
    assert_eq!(stub.said(), ["hi, cy"]);
    let attempt = testing::run(Grumble {}).state(stub.clone()).await;
    assert!(attempt.failed_hook_ran);
    assert_eq!(stub.said()[1], "hi, grumble failed: no greeting today");
    // Without it, the run fails as a worker would refuse to start.
    let attempt = testing::run(Greet { name: "cy".into() }).await;
    let Outcome::Failed(reason) = attempt.outcome else {
        panic!("{:?}", attempt.outcome);
    };
    assert!(
        reason.contains("state.greet") && reason.contains("Greeter"),
        "{reason}"
    );
    // State read without being declared fails the job's first run, whatever it was given.
    let attempt = testing::run(Sneaky {}).state(Greeter::new("hi")).await;
    let Outcome::Failed(reason) = attempt.outcome else {
        panic!("{:?}", attempt.outcome);
    };
    assert!(
        reason.contains("without declaring it") && reason.contains("#[job(state ="),
        "{reason}"
    );

    // The inline fake.
    let inline_greeter = Greeter::new("hey");
    let fake = testing::inline().state(inline_greeter.clone());
    Greet { name: "dee".into() }.dispatch().await.unwrap();
    fake.assert_ran::<Greet>();
    Grumble {}.dispatch().await.unwrap();
    assert_eq!(
        inline_greeter.said(),
        ["hey, dee", "hey, grumble failed: no greeting today"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_worker_stops_with_its_host_dispatches_through_its_own_handle_and_outlives_a_blocked_handler(
) {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let greeter = Greeter::new("hello");
    let (shutdown, shutdown_signal) = tokio::sync::oneshot::channel::<()>();
    assert_eq!(WorkerConfig::default().on_blocked, OnBlocked::AbandonJob);
    let worker = Worker::new(
        WorkerConfig {
            concurrency: 2,
            ..config(&["default", "relayed"])
        },
        queue.clone(),
    )
    .unwrap()
    .state(greeter.clone());
    assert_eq!(worker.stats().processed(), 0);
    let stats = worker.stats();
    let running = tokio::spawn(worker.run_until(async {
        let _ = shutdown_signal.await;
    }));

    // A handler that blocks its thread past its timeout: its job fails as timed out, and the
    // worker, this test's process with it, goes on.
    let blocking = Block { ms: 4000 }
        .dispatch()
        .timeout(1)
        .tries(1)
        .via(&queue)
        .await
        .unwrap();
    let record = wait_for(LONG, "the blocked job fails as timed out", || async {
        queue.failed_job(&blocking.to_string()).await.unwrap()
    })
    .await;
    assert!(
        record.exception.contains("has timed out"),
        "{}",
        record.exception
    );

    // A job that dispatches without naming a handle reaches the worker's Redis, and the
    // worker did not take the process-wide default.
    Relay { name: "eve".into() }
        .dispatch()
        .via(&queue)
        .await
        .unwrap();
    wait_until(LONG, "the relayed greeting ran", || async {
        greeter.said() == ["hello, eve"]
    })
    .await;
    assert!(
        RedisQueue::set_default(redis.queue()),
        "the process-wide default is still free"
    );

    shutdown.send(()).unwrap();
    let exit = tokio::time::timeout(LONG, running).await.unwrap().unwrap();
    assert_eq!(exit.unwrap(), Exit::Stopped);
    assert!(stats.processed() >= 2);
}
