//! The worker the end-to-end tests run: the example jobs, built by cargo with the tests so it
//! is never stale. `TEST_SCHEDULE=<name>:<every|cron>:<missed>` defines one schedule of a
//! `Step` job labelled `<name>` on queue `sched` (for `--schedule`): `every` is a number of
//! seconds or a cron expression, `missed` is `skip`, `last` or `all-N`;
//! `TEST_SCHEDULE_OVERLAP=1` makes it `without_overlapping`. `TEST_OUTBOX_DATABASE_URL` makes
//! it relay the default outbox of that database beside its jobs. `TEST_DEFAULT_QUEUES=a,b`
//! stands for a binary's own default queues (`Command::default_queues`), which `--queue`
//! overrides. It links one job type more than `test_worker_old`, `new_kind`: the type a
//! release adds, which the workers of the release before do not link.

use redjob::schedule::{Missed, Schedule};
use redjob::{job, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A job type of the newer release only: `test_worker_old` does not link it.
#[derive(Serialize, Deserialize)]
struct NewKind {}

#[job(name = "new_kind")]
impl Job for NewKind {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

fn main() -> std::process::ExitCode {
    examples::link();
    if let Ok(spec) = std::env::var("TEST_SCHEDULE") {
        define(&spec);
    }
    if let Ok(queues) = std::env::var("TEST_DEFAULT_QUEUES") {
        return with_default_queues(&queues);
    }
    match std::env::var("TEST_OUTBOX_DATABASE_URL") {
        Ok(url) => relaying(&url),
        Err(_) => redjob_worker::main(),
    }
}

/// The worker of a binary that takes jobs from `queues` unless told otherwise.
fn with_default_queues(queues: &str) -> std::process::ExitCode {
    let command = redjob_worker::Command::from_args().default_queues(queues.split(','));
    let runtime = redjob_worker::async_runtime(command.options().threads).expect("a Tokio runtime");
    runtime.block_on(command.run())
}

/// The worker with an outbox relay: a program built on `redjob_worker::Command`.
fn relaying(database_url: &str) -> std::process::ExitCode {
    let command = redjob_worker::Command::from_args();
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime");
    runtime.block_on(async {
        let pool = sqlx::PgPool::connect(database_url)
            .await
            .expect("TEST_OUTBOX_DATABASE_URL is reachable");
        command.relay_outbox(pool).run().await
    })
}

fn define(spec: &str) {
    let mut parts = spec.splitn(3, ':');
    let (name, when, missed) = (
        parts.next().unwrap_or("tick"),
        parts.next().unwrap_or("1"),
        parts.next().unwrap_or("last"),
    );
    let job = examples::Step::new(name).dispatch().on_queue("sched");
    let schedule = Schedule::new(name, job);
    let schedule = match when.parse::<u64>() {
        Ok(seconds) => schedule.every(Duration::from_secs(seconds)),
        Err(_) => schedule
            .cron(when)
            .expect("TEST_SCHEDULE's cron expression"),
    };
    let missed = match missed {
        "skip" => Missed::Skip,
        "last" => Missed::RunLast,
        all => Missed::RunAll {
            max: all.trim_start_matches("all-").parse().unwrap_or(1),
        },
    };
    let schedule = match std::env::var("TEST_SCHEDULE_OVERLAP").as_deref() {
        Ok("1") => schedule.without_overlapping(),
        _ => schedule,
    };
    redjob::schedule::define(schedule.missed(missed));
}
