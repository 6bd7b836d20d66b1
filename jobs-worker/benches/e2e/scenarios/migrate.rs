//! `migrate`: 1,000,000 jobs due at one instant, and the slowest script call in the SLOWLOG.

use redjob::RedisQueue;
use serde_json::{json, Map, Value};

use crate::common::round2;
use crate::jobs::Noop;
use crate::measure::{queue_calls_in_slowlog, reset_slowlog};
use crate::run::{error_text, timed_drain};
use crate::{Args, QUEUE};

pub(crate) async fn migrate(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let jobs = 1_000_000;
    fill_delayed_all_due(queue, jobs).await?;
    reset_slowlog(queue).await?;
    let (rate, secs) = timed_drain(args, queue, jobs).await?;
    let slow = queue_calls_in_slowlog(queue).await?;
    let mut out = Map::new();
    out.insert("jobs".into(), json!(jobs));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("jobs_per_sec".into(), json!(rate.round()));
    out.insert("elapsed_s".into(), json!(round2(secs)));
    let micros = |e: &Value| e["us"].as_i64().unwrap_or(0);
    let over_20ms = slow.iter().filter(|e| micros(e) > 20_000).count();
    let slowest = slow.iter().max_by_key(|e| micros(e)).cloned();
    out.insert("calls_over_1ms".into(), json!(slow.len()));
    out.insert("calls_over_20ms".into(), json!(over_20ms));
    out.insert("slowest_call".into(), json!(slowest));
    Ok(out)
}

/// Writes `jobs` no-op jobs straight into the delayed set, all due at the same past instant.
async fn fill_delayed_all_due(queue: &RedisQueue, jobs: usize) -> Result<(), String> {
    let payload = Noop { n: 0, t: 0.0 }
        .dispatch()
        .on_queue(QUEUE)
        .envelope()
        .map_err(error_text)?
        .payload;
    for start in (0..jobs).step_by(10_000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg("queues:peerkit:delayed");
        for n in start..start + 10_000 {
            // Members differ by their uuid alone.
            zadd.arg(1.0).arg(payload.replacen(
                &payload[9..45],
                &format!("00000000-0000-4000-8000-{n:012}"),
                1,
            ));
        }
        queue.query::<()>(&zadd).await.map_err(error_text)?;
    }
    Ok(())
}
