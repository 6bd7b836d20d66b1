//! The idle worker's latencies: `delayed` and `pickup` (lateness of a job's start), and `wait`
//! (a tracked job's result in hand).

use redjob::{Bulk, RedisQueue};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

use crate::common::round2;
use crate::jobs::{tracker, wall_ms, Answer, Timed};
use crate::measure::latency_fields;
use crate::run::{error_text, stopped, worker};
use crate::{Args, BOUND, DELAYED_JOBS, IDLE, PICKUP_JOBS, QUEUE};

/// How the lateness scenarios hand their [`Timed`] jobs to the idle worker.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Arrival {
    /// `delayed`: one bulk of jobs due over 5 s, starting 500 ms after the push.
    Delayed,
    /// `pickup`: jobs due at once, pushed one by one 20 ms apart.
    Pickup,
}

pub(crate) async fn lateness(
    args: &Args,
    queue: &RedisQueue,
    arrival: Arrival,
) -> Result<Map<String, Value>, String> {
    let jobs = match arrival {
        Arrival::Delayed => DELAYED_JOBS,
        Arrival::Pickup => PICKUP_JOBS,
    };
    tracker().reset(jobs);
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());
    tokio::time::sleep(IDLE).await;
    let mut out = Map::new();
    let base = wall_ms().floor();
    let add_start = Instant::now();
    match arrival {
        Arrival::Delayed => {
            push_delayed(queue, jobs, base).await?;
            let add_ms = add_start.elapsed().as_secs_f64() * 1000.0;
            out.insert("add_ms".into(), json!(round2(add_ms)));
        }
        Arrival::Pickup => push_pickups(queue, jobs).await?,
    }
    let finished = tracker()
        .wait_until_done(BOUND.saturating_sub(add_start.elapsed()), &stats)
        .await;
    stop.cancel();
    stopped(running).await?;
    let samples = tracker().samples.lock().unwrap().clone();
    out.insert("jobs".into(), json!(jobs));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("completed".into(), json!(samples.len()));
    if arrival == Arrival::Delayed {
        let early = samples.iter().filter(|l| **l < 0.0).count();
        out.insert("early".into(), json!(early));
    }
    out.extend(latency_fields(&samples));
    if finished.is_none() {
        out.insert("error".into(), json!("bound reached"));
    }
    Ok(out)
}

/// One bulk of `jobs` [`Timed`] jobs, due evenly over 5 s from 500 ms after `base_ms`.
async fn push_delayed(queue: &RedisQueue, jobs: usize, base_ms: f64) -> Result<(), String> {
    let mut bulk = Bulk::via(queue);
    for i in 0..jobs {
        let due_ms = base_ms + 500.0 + ((i * 5000) / jobs) as f64;
        let due = chrono::DateTime::from_timestamp_millis(due_ms as i64).unwrap();
        bulk.add(Timed { due_ms }.dispatch().on_queue(QUEUE).delay(due))
            .map_err(error_text)?;
    }
    bulk.send().await.map_err(error_text)?;
    Ok(())
}

/// `jobs` [`Timed`] jobs due at once, each dispatched 20 ms after the one before.
async fn push_pickups(queue: &RedisQueue, jobs: usize) -> Result<(), String> {
    for _ in 0..jobs {
        let t = wall_ms();
        Timed { due_ms: t }
            .dispatch()
            .on_queue(QUEUE)
            .via(queue)
            .await
            .map_err(error_text)?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// `wait`: 200 sequential round trips onto an idle worker, each a tracked dispatch awaited to
/// its result, which must be the job's `{n}`.
pub(crate) async fn wait(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let running = tokio::spawn(worker.run());
    tokio::time::sleep(IDLE).await;
    let (mut samples, mut wrong, mut error) = (Vec::new(), 0, None);
    let first = Instant::now();
    for n in 0..PICKUP_JOBS as u64 {
        let left = BOUND.saturating_sub(first.elapsed());
        if left.is_zero() {
            error = Some("bound reached".to_owned());
            break;
        }
        let t0 = Instant::now();
        let dispatched = Answer { n }
            .dispatch()
            .on_queue(QUEUE)
            .via(queue)
            .track()
            .await;
        let answer = match dispatched {
            Ok(job) => job.wait(left).await.map_err(|e| e.to_string()),
            Err(e) => Err(error_text(e)),
        };
        match answer {
            Ok(answer) => {
                samples.push(t0.elapsed().as_secs_f64() * 1000.0);
                wrong += usize::from(answer != json!({ "n": n }));
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    stop.cancel();
    stopped(running).await?;
    let mut out = Map::new();
    out.insert("jobs".into(), json!(PICKUP_JOBS));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("completed".into(), json!(samples.len()));
    out.extend(latency_fields(&samples));
    if wrong > 0 {
        out.insert("wrong_result".into(), json!(wrong));
    }
    if let Some(error) = error {
        out.insert("error".into(), json!(error));
    }
    Ok(out)
}
