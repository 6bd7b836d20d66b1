//! `enqueue` (bulk dispatch) and `enqueue_single` (awaited dispatches, beside as many PINGs).

use redjob::RedisQueue;
use serde_json::{json, Map, Value};
use std::time::Instant;

use crate::common::round2;
use crate::jobs::Noop;
use crate::measure::throughput;
use crate::run::{error_text, push_noops};
use crate::{Args, QUEUE, SINGLE_MAX};

pub(crate) async fn enqueue(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let start = Instant::now();
    push_noops(queue, args.jobs).await.map_err(error_text)?;
    Ok(throughput(args.jobs, start.elapsed().as_secs_f64()))
}

pub(crate) async fn enqueue_single(
    args: &Args,
    queue: &RedisQueue,
) -> Result<Map<String, Value>, String> {
    let jobs = args.jobs.min(SINGLE_MAX);
    let secs = awaited_dispatches(queue, jobs).await?;
    let ping_secs = awaited_pings(queue, jobs).await?;
    let micros_each = |seconds: f64| round2(seconds * 1e6 / jobs as f64);
    let mut out = throughput(jobs, secs);
    out.insert("dispatch_us".into(), json!(micros_each(secs)));
    out.insert("ping_us".into(), json!(micros_each(ping_secs)));
    Ok(out)
}

/// Dispatches `jobs` no-op jobs one at a time, each awaited; returns the seconds they took.
async fn awaited_dispatches(queue: &RedisQueue, jobs: usize) -> Result<f64, String> {
    let start = Instant::now();
    for n in 0..jobs {
        Noop {
            n: n as u64,
            t: 0.0,
        }
        .dispatch()
        .on_queue(QUEUE)
        .via(queue)
        .await
        .map_err(error_text)?;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The floor under one awaited dispatch: as many PINGs, each awaited, through the same
/// connection from the same caller; returns the seconds they took.
async fn awaited_pings(queue: &RedisQueue, pings: usize) -> Result<f64, String> {
    let mut conn = queue.connection();
    let start = Instant::now();
    for _ in 0..pings {
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed().as_secs_f64())
}
