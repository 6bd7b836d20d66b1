//! `fairness`: quiet groups' waits while one group's backlog drains.

use redjob::{Bulk, PendingDispatch, RedisQueue};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

use crate::common::{round2, wall_us};
use crate::jobs::{tracker, Tenant};
use crate::measure::{latency_fields, throughput};
use crate::run::{error_text, stopped, worker};
use crate::{Args, CHUNK, QUEUE};

/// How many jobs each quiet group of `fairness` pushes.
const QUIET_JOBS: usize = 10;

/// `fairness`: one group (`g0`) has a backlog of N jobs; once the worker drains it, each of the
/// other groups (`--groups`, 1,000 by default) pushes 10 jobs, one group after the other. The
/// quiet groups' waits, dispatch to start, and the drain's rate. With `--plain`, every job goes
/// to the queue's own list: the baseline, where the quiet jobs wait behind the backlog.
pub(crate) async fn fairness(
    args: &Args,
    queue: &RedisQueue,
) -> Result<Map<String, Value>, String> {
    let groups = if args.groups == 0 {
        1000
    } else {
        args.groups.max(2)
    };
    let quiet = (groups - 1) * QUIET_JOBS;
    let place = |dispatch: PendingDispatch<Tenant>, group: usize| match args.plain {
        true => dispatch.on_queue(QUEUE),
        false => dispatch.on_queue(QUEUE).group(format!("g{group}")),
    };
    for start in (0..args.jobs).step_by(CHUNK) {
        let mut bulk = Bulk::via(queue);
        for n in start..(start + CHUNK).min(args.jobs) {
            let job = Tenant {
                n: n as u64,
                dispatched_us: 0,
            };
            bulk.add(place(job.dispatch(), 0)).map_err(error_text)?;
        }
        bulk.send().await.map_err(error_text)?;
    }
    tracker().reset(args.jobs + quiet);
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let stats = worker.stats();
    let start = Instant::now();
    let running = tokio::spawn(worker.run());
    // The quiet groups arrive while the backlog drains.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pushing = Instant::now();
    let done_before_push = tracker().done();
    for group in 1..groups {
        let mut bulk = Bulk::via(queue);
        for i in 0..QUIET_JOBS {
            let job = Tenant {
                n: (args.jobs + (group - 1) * QUIET_JOBS + i) as u64,
                dispatched_us: wall_us(),
            };
            bulk.add(place(job.dispatch(), group)).map_err(error_text)?;
        }
        bulk.send().await.map_err(error_text)?;
    }
    let push_ms = pushing.elapsed().as_secs_f64() * 1000.0;
    let done_while_pushing = tracker().done() - done_before_push;
    let bound = Duration::from_secs_f64(args.timeout_s);
    let finished = tracker().wait_until_done(bound, &stats).await;
    stop.cancel();
    stopped(running).await?;
    let samples = tracker().samples.lock().unwrap().clone();
    let mut out = Map::new();
    out.insert("groups".into(), json!(groups));
    out.insert("plain".into(), json!(args.plain));
    out.insert("quiet_jobs".into(), json!(quiet));
    out.insert("quiet_push_ms".into(), json!(round2(push_ms)));
    out.insert("done_before_push".into(), json!(done_before_push));
    out.insert("done_while_pushing".into(), json!(done_while_pushing));
    out.insert("concurrency".into(), json!(args.concurrency));
    match finished {
        Some(at) => {
            let secs = (at - start).as_secs_f64();
            out.extend(throughput(args.jobs + quiet, secs));
        }
        None => {
            out.insert("error".into(), json!("bound reached"));
        }
    }
    out.extend(latency_fields(&samples));
    Ok(out)
}
