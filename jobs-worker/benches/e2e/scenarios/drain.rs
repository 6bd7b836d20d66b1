//! `drain` (one worker through N queued jobs) and `backlog` (its rate with 1,000,000 queued
//! against 20,000).

use redjob::RedisQueue;
use serde_json::{json, Map, Value};

use crate::common::{flush, round2};
use crate::measure::{peak_rss_mb, throughput, CpuReading};
use crate::run::{error_text, prep_in_child, timed_drain};
use crate::{Args, QUEUE};

pub(crate) async fn drain(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    if args.events {
        queue
            .set_events(QUEUE, Some(100_000))
            .await
            .map_err(error_text)?;
    }
    prep_in_child(args, args.jobs);
    let cpu = CpuReading::take(queue).await?;
    let (_, secs) = timed_drain(args, queue, args.jobs).await?;
    let mut out = throughput(args.jobs, secs);
    out.extend(cpu.since(queue, args.jobs, secs).await?);
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("rss_mb".into(), json!(peak_rss_mb()));
    Ok(out)
}

pub(crate) async fn backlog(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let mut rates = Vec::new();
    for jobs in [20_000, 1_000_000] {
        flush(queue).await?;
        prep_in_child(args, jobs);
        let (rate, _) = timed_drain(args, queue, jobs).await?;
        rates.push(rate);
    }
    let mut out = Map::new();
    out.insert("jobs".into(), json!(1_000_000));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("jobs_per_sec".into(), json!(rates[1].round()));
    out.insert("jobs_per_sec_20k".into(), json!(rates[0].round()));
    out.insert("ratio_1m_to_20k".into(), json!(round2(rates[1] / rates[0])));
    Ok(out)
}
