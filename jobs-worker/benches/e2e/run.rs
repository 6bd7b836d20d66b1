//! Running the worker under test: filling its queue (here or in a child process), starting it,
//! waiting for its jobs, stopping it.

use redjob::{Bulk, Job, PendingDispatch, RedisQueue};
use redjob_worker::{Worker, WorkerConfig};
use std::time::{Duration, Instant};
use tracing::Instrument;

use crate::jobs::{tracker, Noop, Tally};
use crate::{Args, CHUNK, QUEUE};

/// The worker under test: the kit's queue at `--concurrency`, its default options otherwise,
/// and with `--state` the tally its no-op jobs count on.
pub(crate) fn worker(args: &Args, queue: &RedisQueue) -> Worker {
    let config = WorkerConfig {
        queues: vec![QUEUE.to_owned()],
        concurrency: args.concurrency,
        durable_acks: args.durability(),
        ..WorkerConfig::default()
    };
    let worker = Worker::new(config, queue.clone()).expect("a valid worker");
    if args.state {
        worker.state(Tally(tracker()))
    } else {
        worker
    }
}

pub(crate) async fn push_noops(queue: &RedisQueue, jobs: usize) -> redjob::Result<()> {
    push_in_chunks(queue, jobs, |n| Noop { n, t: 0.0 }).await
}

/// Pushes `jobs` no-op jobs spread over `groups` groups in even blocks (`g0` has the first
/// ones), in bulk dispatches of [`CHUNK`].
pub(crate) async fn push_grouped_noops(
    queue: &RedisQueue,
    jobs: usize,
    groups: usize,
) -> redjob::Result<()> {
    for start in (0..jobs).step_by(CHUNK) {
        let mut bulk = Bulk::via(queue);
        for n in start..(start + CHUNK).min(jobs) {
            let group = format!("g{}", n * groups / jobs);
            let job = Noop {
                n: n as u64,
                t: 0.0,
            };
            bulk.add(job.dispatch().on_queue(QUEUE).group(group))?;
        }
        bulk.send().await?;
    }
    Ok(())
}

/// Pushes `jobs` jobs made by `make` from their number onto the kit's queue, in bulk
/// dispatches of [`CHUNK`].
pub(crate) async fn push_in_chunks<J: Job>(
    queue: &RedisQueue,
    jobs: usize,
    make: impl Fn(u64) -> J,
) -> redjob::Result<()> {
    let pushes = async {
        for start in (0..jobs).step_by(CHUNK) {
            let mut bulk = Bulk::via(queue);
            for n in start..(start + CHUNK).min(jobs) {
                bulk.add(PendingDispatch::new(make(n as u64)).on_queue(QUEUE))?;
            }
            bulk.send().await?;
        }
        Ok(())
    };
    // With --otel, each job's payload carries this span's context.
    pushes.instrument(tracing::info_span!("dispatching")).await
}

/// Pre-fills the queue in a child process, so the worker's peak RSS is its own: with no-op
/// jobs (`prep`) or one batch of them (`prep-batch`).
pub(crate) fn prep_in_child(args: &Args, jobs: usize) {
    prep_child(args, "prep", jobs)
}

pub(crate) fn prep_child(args: &Args, prep: &str, jobs: usize) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--scenario",
            prep,
            "--jobs",
            &jobs.to_string(),
            "--redis",
            &args.redis,
        ])
        .args(args.otel.then_some("--otel"))
        .args(["--progress", &args.progress.to_string()])
        .args(["--groups", &args.groups.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("cannot run the prep child");
    assert!(status.success(), "the prep child failed: {status}");
}

/// Times one worker draining `jobs` queued jobs; returns (jobs/s, seconds).
pub(crate) async fn timed_drain(
    args: &Args,
    queue: &RedisQueue,
    jobs: usize,
) -> Result<(f64, f64), String> {
    let (secs, (stop, running)) = run_until_done(args, worker(args, queue), jobs).await?;
    stop.cancel();
    stopped(running).await?;
    Ok((jobs as f64 / secs, secs))
}

/// A running worker: its stop token and its task.
pub(crate) type Running = (
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<redjob_worker::Exit, redjob_worker::WorkerError>>,
);

/// Starts `worker` and waits until `jobs` jobs have run (within `--timeout-s`): the seconds
/// from its start to the last one's, and the worker, still running. One that falls short is
/// stopped, and says how short.
pub(crate) async fn run_until_done(
    args: &Args,
    worker: Worker,
    jobs: usize,
) -> Result<(f64, Running), String> {
    tracker().reset(jobs);
    let start = Instant::now();
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());
    let bound = Duration::from_secs_f64(args.timeout_s);
    match tracker().wait_until_done(bound, &stats).await {
        Some(at) => Ok(((at - start).as_secs_f64(), (stop, running))),
        None => {
            stop.cancel();
            stopped(running).await?;
            Err(format!(
                "only {} of {jobs} jobs ran within {bound:?}",
                tracker().done()
            ))
        }
    }
}

/// Waits for a stopped worker's task; a worker that could not start says why.
pub(crate) async fn stopped(
    running: tokio::task::JoinHandle<Result<redjob_worker::Exit, redjob_worker::WorkerError>>,
) -> Result<(), String> {
    match running.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(format!("the worker could not start: {err}")),
        Err(err) => Err(format!("the worker task ended abnormally: {err}")),
    }
}

pub(crate) fn error_text(e: redjob::Error) -> String {
    e.to_string()
}
