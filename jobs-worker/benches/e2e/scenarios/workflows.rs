//! `chain` (the gaps between links) and `batch` (a batch drained to its callback).

use redjob::{Batch, Chain, RedisQueue};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::round2;
use crate::jobs::{
    tracker, BatchDone, BatchNoop, ChainLink, CALLBACK_STARTED, CALLBACK_START_US,
    LAST_CHILD_END_US, LINK_TIMES,
};
use crate::measure::{latency_fields, peak_rss_mb, throughput, CpuReading};
use crate::run::{error_text, prep_child, stopped, worker};
use crate::{Args, QUEUE};

/// One batch of `jobs` [`BatchNoop`]s with [`BatchDone`] as its completion callback.
pub(crate) async fn dispatch_batch(queue: &RedisQueue, jobs: usize) -> Result<(), String> {
    Batch::new()
        .name("peerkit")
        .jobs((0..jobs as u64).map(|n| BatchNoop { n }.dispatch().on_queue(QUEUE)))
        .then(BatchDone {}.dispatch().on_queue(QUEUE))
        .via(queue)
        .dispatch()
        .await
        .map_err(error_text)?;
    Ok(())
}

pub(crate) async fn chain(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let links = args.jobs;
    *LINK_TIMES.lock().unwrap() = vec![(0, 0); links];
    dispatch_chain(queue, links).await?;
    tracker().reset(links);
    let worker = worker(args, queue);
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());
    let finished = tracker()
        .wait_until_done(Duration::from_secs_f64(args.timeout_s), &stats)
        .await;
    stop.cancel();
    stopped(running).await?;
    if finished.is_none() {
        return Err(format!("only {} of {links} links ran", tracker().done()));
    }
    let mut out = Map::new();
    out.insert("jobs".into(), json!(links));
    out.insert("concurrency".into(), json!(args.concurrency));
    let fields = latency_fields(&link_gaps_ms());
    for (name, value) in fields {
        out.insert(format!("gap_{name}"), value);
    }
    Ok(out)
}

async fn dispatch_chain(queue: &RedisQueue, links: usize) -> Result<(), String> {
    let mut chain = Chain::new(ChainLink { n: 0 }.dispatch().on_queue(QUEUE));
    for n in 1..links {
        chain = chain.then(ChainLink { n }.dispatch().on_queue(QUEUE));
    }
    chain.via(queue).dispatch().await.map_err(error_text)?;
    Ok(())
}

/// From one link's end to the next one's start, in milliseconds.
fn link_gaps_ms() -> Vec<f64> {
    let times = LINK_TIMES.lock().unwrap().clone();
    times
        .windows(2)
        .map(|pair| (pair[1].0 as f64 - pair[0].1 as f64) / 1000.0)
        .collect()
}

pub(crate) async fn batch(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    prep_child(args, "prep-batch", args.jobs);
    tracker().reset(args.jobs);
    CALLBACK_START_US.store(0, Ordering::Release);
    CALLBACK_STARTED.clear();
    let cpu = CpuReading::take(queue).await?;
    let worker = worker(args, queue);
    let start = Instant::now();
    let stop = worker.stop_token();
    let running = tokio::spawn(worker.run());
    let deadline = start + Duration::from_secs_f64(args.timeout_s);
    let started = CALLBACK_STARTED.wait(deadline, || false).await;
    let secs = started
        .map_or(start.elapsed(), |at| at - start)
        .as_secs_f64();
    stop.cancel();
    stopped(running).await?;
    let callback = CALLBACK_START_US.load(Ordering::Acquire);
    if callback == 0 {
        return Err(format!(
            "the callback did not run within {:?}; {} of {} jobs ran",
            deadline - start,
            tracker().done(),
            args.jobs
        ));
    }
    let last_child = LAST_CHILD_END_US.load(Ordering::Acquire);
    let mut out = throughput(args.jobs, secs);
    out.extend(cpu.since(queue, args.jobs, secs).await?);
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert(
        "callback_ms".into(),
        json!(round2((callback as f64 - last_child as f64) / 1000.0)),
    );
    out.insert("rss_mb".into(), json!(peak_rss_mb()));
    if args.events {
        out.insert("events".into(), json!(true));
    }
    if args.progress > 0 {
        out.insert("progress_reports".into(), json!(args.progress));
    }
    Ok(out)
}
