//! Synchronous runs (`redjob_worker::testing::run`) and the inline fake: jobs taken through a
//! worker's attempt path without Redis.

use redjob::middleware::{Layer, Limit, Middleware, Next, RateLimited, Skip};
use redjob::testing;
use redjob::{
    async_trait, job, Batch, Chain, FailedContext, Job, JobContext, JobResult, PendingDispatch,
};
use redjob_worker::testing::{inline, run, Outcome, Run};
use redjob_worker::WorkerConfig;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What `failed()` hooks were called with: the job's status and the reason.
static HOOKS: Mutex<Vec<(u16, String)>> = Mutex::new(Vec::new());

#[derive(Serialize, Deserialize)]
struct CallApi {
    status: u16,
}

#[job(tries = 3, backoff = [5, 30])]
impl Job for CallApi {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        match self.status {
            429 => ctx.release(60),
            500..=599 => return Err("the API failed".into()),
            0 => panic!("no status at all"),
            _ => {}
        }
        Ok(())
    }

    async fn failed(&self, ctx: &FailedContext) {
        let mut hooks = HOOKS.lock().unwrap();
        hooks.push((self.status, ctx.reason().to_owned()));
    }
}

#[tokio::test]
async fn one_attempt_says_what_became_of_the_job() {
    let released = run(CallApi { status: 429 }).await;
    assert_eq!(released.outcome, Outcome::Released(Duration::from_secs(60)));
    assert_eq!((released.number, released.error.as_deref()), (1, None));

    let retried = run(CallApi { status: 500 }).await;
    assert_eq!(retried.outcome, Outcome::Retried(Duration::from_secs(5)));
    assert_eq!(retried.error.as_deref(), Some("the API failed"));
    let second = run(CallApi { status: 500 }).attempt(2).await;
    assert_eq!(second.outcome, Outcome::Retried(Duration::from_secs(30)));
    assert!(!second.failed_hook_ran);

    let last = run(CallApi { status: 910 }).await;
    assert_eq!(last.outcome, Outcome::Done);

    let panicked = run(CallApi { status: 0 }).attempt(3).await;
    assert_eq!(
        panicked.outcome,
        Outcome::Failed("panicked: no status at all".into())
    );
    assert!(panicked.failed_hook_ran);
    assert!(HOOKS
        .lock()
        .unwrap()
        .contains(&(0, "panicked: no status at all".to_owned())));

    // A dispatch's own options win over its type's, as in a worker.
    let once = Run::dispatch(CallApi { status: 500 }.dispatch().tries(1)).await;
    assert_eq!(once.outcome, Outcome::Failed("the API failed".into()));
    // Past its tries a job fails before it runs.
    let too_many = run(CallApi { status: 910 }).attempt(4).await;
    assert_eq!(
        too_many.outcome,
        Outcome::Failed("CallApi has been attempted too many times.".into())
    );
}

#[tokio::test]
async fn a_run_to_the_end_carries_attempts_as_redis_would_and_calls_the_failed_hook_once() {
    let runs = run(CallApi { status: 503 }).to_end().await;
    let outcomes: Vec<_> = runs.attempts.iter().map(|a| a.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Retried(Duration::from_secs(5)),
            Outcome::Retried(Duration::from_secs(30)),
            Outcome::Failed("the API failed".into()),
        ]
    );
    let numbers: Vec<_> = runs.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert!(runs.failed() && runs.last().failed_hook_ran);
    let hooks = HOOKS.lock().unwrap().clone();
    assert_eq!(hooks.iter().filter(|(status, _)| *status == 503).count(), 1);

    // Releases count attempts: the third release is the last try, the fourth run fails.
    let released = run(CallApi { status: 429 }).to_end().await;
    assert_eq!(released.attempts.len(), 4);
    assert_eq!(
        released.outcome(),
        &Outcome::Failed("CallApi has been attempted too many times.".into())
    );
}

#[derive(Serialize, Deserialize)]
struct Shaky {
    succeeds_on: u32,
}

#[job(tries = 5)]
impl Job for Shaky {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        if ctx.attempt() < self.succeeds_on {
            return Err(format!("attempt {} failed", ctx.attempt()).into());
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_flaky_job_succeeds_on_the_attempt_it_should() {
    let runs = run(Shaky { succeeds_on: 3 }).to_end().await;
    assert!(runs.succeeded());
    let errors: Vec<_> = runs.attempts.iter().map(|a| a.error.clone()).collect();
    assert_eq!(
        errors,
        [
            Some("attempt 1 failed".to_owned()),
            Some("attempt 2 failed".to_owned()),
            None
        ]
    );
    // With the worker's backoff for a job that sets none.
    let config = WorkerConfig {
        backoff: redjob::Backoff::new([7]),
        ..WorkerConfig::default()
    };
    let first = run(Shaky { succeeds_on: 2 }).config(config).await;
    assert_eq!(first.outcome, Outcome::Retried(Duration::from_secs(7)));
}

#[derive(Serialize, Deserialize)]
struct Slow {
    seconds: u64,
}

#[job(timeout = 2, tries = 2)]
impl Job for Slow {
    async fn handle(&self, _: &JobContext) -> JobResult {
        tokio::time::sleep(Duration::from_secs(self.seconds)).await;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_past_its_timeout_is_stopped_on_a_paused_clock() {
    let started = tokio::time::Instant::now();
    let timed_out = run(Slow { seconds: 3600 }).to_end().await;
    let outcomes: Vec<_> = timed_out
        .attempts
        .iter()
        .map(|a| a.outcome.clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Retried(Duration::ZERO),
            Outcome::Failed("Slow has timed out.".into())
        ]
    );
    // Each attempt stopped at its two seconds, on the test's clock.
    assert_eq!(started.elapsed().as_secs(), 4);
    assert_eq!(run(Slow { seconds: 1 }).await.outcome, Outcome::Done);
}

#[derive(Serialize, Deserialize)]
struct Limited {
    skip: bool,
    limited: bool,
}

#[job]
impl Job for Limited {
    fn middleware(&self) -> Vec<Layer> {
        let mut layers = vec![Skip::when(self.skip).into()];
        if self.limited {
            layers.push(RateLimited::new(Limit::per_minute(1)).into());
        }
        layers
    }

    async fn handle(&self, _: &JobContext) -> JobResult {
        Ok(())
    }
}

/// Worker middleware that puts every job back for a while, without counting the attempt, the
/// first `times` times it sees one.
struct Busy {
    seen: &'static AtomicU32,
    times: u32,
}

#[async_trait]
impl Middleware for Busy {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        if self.seen.fetch_add(1, Ordering::SeqCst) < self.times {
            ctx.requeue(2);
            return Ok(());
        }
        next.run(ctx).await
    }
}

#[tokio::test]
async fn middleware_runs_as_in_a_worker() {
    let skipped = run(Limited {
        skip: true,
        limited: false,
    })
    .await;
    assert_eq!(skipped.outcome, Outcome::Skipped);
    let ran = run(Limited {
        skip: false,
        limited: false,
    })
    .await;
    assert_eq!(ran.outcome, Outcome::Done);

    // Middleware that keeps its state in Redis cannot run on a fake: the attempt says so.
    let limited = run(Limited {
        skip: false,
        limited: true,
    })
    .await;
    let Outcome::Failed(reason) = &limited.outcome else {
        panic!("expected a failure, got {:?}", limited.outcome);
    };
    assert!(reason.contains("keeps its state in Redis"), "{reason}");
    assert!(reason.contains("Run::via"), "{reason}");

    static SEEN: AtomicU32 = AtomicU32::new(0);
    let runs = run(Shaky { succeeds_on: 1 })
        .middleware(Busy {
            seen: &SEEN,
            times: 2,
        })
        .to_end()
        .await;
    let outcomes: Vec<_> = runs.attempts.iter().map(|a| a.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Requeued(Duration::from_secs(2)),
            Outcome::Requeued(Duration::from_secs(2)),
            Outcome::Done
        ]
    );
    // A requeue gives its attempt back.
    let numbers: Vec<_> = runs.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, [1, 1, 1]);
}

#[derive(Serialize, Deserialize)]
struct FlowStep {
    label: String,
    #[serde(default)]
    fail: bool,
    #[serde(default)]
    prepend: Vec<String>,
    #[serde(default)]
    append: Vec<String>,
    #[serde(default)]
    add_to_batch: Vec<String>,
    #[serde(default)]
    dispatch: Vec<String>,
}

fn step(label: &str) -> FlowStep {
    FlowStep {
        label: label.to_owned(),
        fail: false,
        prepend: Vec::new(),
        append: Vec::new(),
        add_to_batch: Vec::new(),
        dispatch: Vec::new(),
    }
}

fn failing(label: &str) -> FlowStep {
    FlowStep {
        fail: true,
        ..step(label)
    }
}

impl FlowStep {
    fn go(self) -> PendingDispatch<FlowStep> {
        self.dispatch()
    }
}

#[job]
impl Job for FlowStep {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        if self.fail {
            return Err(format!("{} failed", self.label).into());
        }
        for label in &self.prepend {
            ctx.chain().prepend(step(label).go())?;
        }
        for label in &self.append {
            ctx.chain().append(step(label).go())?;
        }
        if let Some(batch) = ctx.batch() {
            for label in &self.add_to_batch {
                batch.add(step(label).go())?;
            }
        }
        for label in &self.dispatch {
            step(label).go().await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_run_reports_what_the_handler_added_and_records_what_it_dispatched() {
    let fake = testing::fake();
    let grown = run(FlowStep {
        prepend: vec!["p1".into(), "p2".into()],
        append: vec!["z".into()],
        dispatch: vec!["mail".into()],
        ..step("grow")
    })
    .await;
    assert_eq!(grown.outcome, Outcome::Done);
    let labels = |jobs: &[testing::Recorded]| -> Vec<String> {
        jobs.iter()
            .map(|j| j.decode::<FlowStep>().unwrap().label)
            .collect()
    };
    assert_eq!(labels(&grown.chain_prepended), ["p1", "p2"]);
    assert_eq!(labels(&grown.chain_appended), ["z"]);
    fake.assert_pushed_with::<FlowStep>(|s| s.label == "mail");
    fake.assert_pushed_times::<FlowStep>(1);
    assert_eq!(labels(&grown.dispatched), ["mail"]);
    drop(fake);

    // With no fake installed, the run's own fake records what the job dispatches.
    let alone = run(FlowStep {
        dispatch: vec!["a".into(), "b".into()],
        ..step("sender")
    })
    .await;
    assert_eq!(alone.outcome, Outcome::Done);
    assert_eq!(labels(&alone.dispatched), ["a", "b"]);
}

/// The labels of the `FlowStep`s an inline fake ran, in order, a failed one marked `!`.
fn ran_steps(inline: &redjob_worker::testing::Inline) -> Vec<String> {
    inline
        .ran()
        .iter()
        .filter_map(|ran| {
            let step = ran.job.decode::<FlowStep>()?;
            Some(match ran.runs.succeeded() {
                true => step.label,
                false => format!("{}!", step.label),
            })
        })
        .collect()
}

#[tokio::test]
async fn inline_dispatches_run_before_the_dispatch_returns() {
    let inline = inline();
    step("first").go().await.unwrap();
    FlowStep {
        dispatch: vec!["nested".into()],
        ..step("outer")
    }
    .go()
    .await
    .unwrap();
    assert_eq!(ran_steps(&inline), ["first", "nested", "outer"]);
    inline.assert_ran::<FlowStep>();
    inline.assert_nothing_failed();
    inline.assert_pushed_times::<FlowStep>(3);

    let failed = failing("broken").go().await;
    assert!(failed.is_ok(), "the dispatch itself succeeded");
    let message = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        inline.assert_nothing_failed()
    }))
    .unwrap_err();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("FlowStep (1 attempt(s)): Failed(\"broken failed\")"),
        "{message}"
    );
}

#[tokio::test]
async fn inline_chains_run_in_order_with_their_edits_and_stop_at_a_failure() {
    let grown = inline();
    Chain::new(
        FlowStep {
            prepend: vec!["p1".into(), "p2".into()],
            append: vec!["z".into()],
            ..step("a")
        }
        .go(),
    )
    .then(step("b").go())
    .dispatch()
    .await
    .unwrap();
    assert_eq!(ran_steps(&grown), ["a", "p2", "p1", "b", "z"]);
    drop(grown);

    let inline = inline();
    Chain::new(step("a").go())
        .then(failing("b").go())
        .then(step("c").go())
        .catch(step("caught").go())
        .dispatch()
        .await
        .unwrap();
    assert_eq!(ran_steps(&inline), ["a", "b!", "caught"]);
}

#[tokio::test]
async fn inline_batches_run_their_jobs_then_their_callbacks() {
    let batch = |jobs: Vec<FlowStep>, allow_failures: bool| {
        let mut batch = Batch::new()
            .jobs(jobs.into_iter().map(FlowStep::go))
            .then(step("then").go())
            .catch(step("catch").go())
            .finally(step("finally").go());
        if allow_failures {
            batch = batch.allow_failures();
        }
        batch
    };
    let cases = [
        (
            vec![step("1"), step("2")],
            false,
            vec!["1", "2", "then", "finally"],
        ),
        (
            vec![step("1"), failing("2"), step("3")],
            false,
            vec!["1", "2!", "catch", "finally"],
        ),
        (
            vec![step("1"), failing("2"), step("3")],
            true,
            vec!["1", "2!", "catch", "3", "finally"],
        ),
        (
            vec![FlowStep {
                add_to_batch: vec!["added".into()],
                ..step("1")
            }],
            false,
            vec!["1", "added", "then", "finally"],
        ),
    ];
    for (jobs, allow_failures, expected) in cases {
        let inline = inline();
        batch(jobs, allow_failures).dispatch().await.unwrap();
        assert_eq!(ran_steps(&inline), expected);
    }

    let inline = inline();
    Chain::new(step("a").go())
        .then_batch(Batch::new().jobs([step("b1").go(), step("b2").go()]))
        .then(step("c").go())
        .then(step("d").go())
        .dispatch()
        .await
        .unwrap();
    assert_eq!(ran_steps(&inline), ["a", "b1", "b2", "c", "d"]);
}

#[derive(Serialize, Deserialize)]
struct AccountRefresh {
    account: u64,
}

#[job(unique_for = 600)]
impl Job for AccountRefresh {
    async fn handle(&self, _: &JobContext) -> JobResult {
        Ok(())
    }

    fn unique_id(&self) -> String {
        self.account.to_string()
    }
}

#[tokio::test]
async fn an_inline_unique_job_frees_its_lock_when_it_is_done() {
    let inline = inline();
    AccountRefresh { account: 1 }.dispatch().await.unwrap();
    AccountRefresh { account: 1 }.dispatch().await.unwrap();
    let ran = inline.ran();
    assert_eq!(ran.len(), 2);
    assert!(ran.iter().all(|r| r.runs.succeeded()));

    // Without running it, a plain fake keeps the lock, as Redis would.
    let fake = testing::fake();
    AccountRefresh { account: 2 }.dispatch().await.unwrap();
    assert!(AccountRefresh { account: 2 }.dispatch().await.is_err());
    fake.assert_pushed_times::<AccountRefresh>(1);
}

#[tokio::test]
async fn a_run_given_a_real_redis_runs_the_middleware_that_keeps_state_there() {
    let redis = tests::TestRedis::start();
    let queue = redis.queue();
    let limited = || {
        Run::dispatch(
            Limited {
                skip: false,
                limited: true,
            }
            .dispatch(),
        )
        .via(&queue)
    };
    assert_eq!(limited().await.outcome, Outcome::Done);
    // One a minute: the second run finds the limit spent and is put back until it frees.
    let Outcome::Requeued(after) = limited().await.outcome else {
        panic!("expected the second run to be requeued");
    };
    assert!(
        after > Duration::from_secs(50) && after <= Duration::from_secs(60),
        "{after:?}"
    );

    // What the job dispatches goes to the run's Redis.
    let sender = FlowStep {
        dispatch: vec!["pushed".into()],
        ..step("sender")
    };
    let attempt = Run::dispatch(sender.go()).via(&queue).await;
    assert_eq!(attempt.outcome, Outcome::Done);
    assert_eq!(queue.size("default").await.unwrap().ready, 1);
}
