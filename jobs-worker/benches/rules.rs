//! Benchmarks of the per-job rules against a real Redis (one JSON line per run on stdout):
//!
//! ```text
//! cargo bench -p redjob-worker --bench rules -- --scenario dispatch --redis redis://127.0.0.1:PORT
//! cargo bench -p redjob-worker --bench rules -- --scenario rate --rate 100 --workers 4 --seconds 60 --redis ...
//! cargo bench -p redjob-worker --bench rules -- --scenario funnel --slots 5 --workers 4 --jobs 2000 --redis ...
//! ```
//!
//! - `dispatch`: awaited dispatches of a plain job and of a unique one (each with its own unique
//!   id, so every one is pushed), alternating one by one so both see the same machine, in
//!   rounds of 1,000 pairs; the mean time of each, their ratio, and the median of the rounds'
//!   ratios.
//! - `rate`: one rate limit of `--rate` jobs per second shared by `--workers` worker processes
//!   with a backlog of jobs under it, for `--seconds`; the admitted rate against the limit, and
//!   the most admissions within any one window, both from the limit's own record of its
//!   admissions on Redis's clock (read every 100 ms); and the handler starts, by the workers'
//!   clock, which also count the time from admission to start.
//! - `funnel`: `--jobs` jobs of 20 ms under a funnel of `--slots`, run by `--workers` worker
//!   processes of concurrency 10; the most handlers ever running at once, counted from inside
//!   them.
//!
//! Worker processes are this program run again with `--scenario worker`.

mod common;

use clap::Parser;
use common::{flush, round2, wall_us};
use redis::AsyncCommands;
use redjob::middleware::{Funnel, Layer, Limit, RateLimited};
use redjob::{job, Bulk, Job, JobContext, JobResult, PendingDispatch, RedisQueue};
use redjob_worker::{Worker, WorkerConfig};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const QUEUE: &str = "rules";
const STARTS: &str = "rules:starts";
const RUNNING: &str = "rules:running";
const ROUND: usize = 1000;

#[derive(Debug, Clone, Parser)]
struct Args {
    #[arg(long, default_value = "dispatch")]
    scenario: String,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    #[arg(long, default_value_t = 100)]
    rate: u32,
    #[arg(long, default_value_t = 4)]
    workers: usize,
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 5)]
    slots: u32,
    #[arg(long, default_value_t = 2000)]
    jobs: usize,
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    #[arg(long, hide = true)]
    bench: bool,
}

/// A plain job, for dispatch timing.
#[derive(Serialize, Deserialize)]
struct Plain {
    n: u64,
}

#[job(name = "rules.plain")]
impl Job for Plain {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

/// A unique job, one lock per `n`.
#[derive(Serialize, Deserialize)]
struct Unique {
    n: u64,
}

#[job(name = "rules.unique", unique_for = 3600)]
impl Job for Unique {
    fn unique_id(&self) -> String {
        self.n.to_string()
    }

    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

/// A job under a rate limit of `rate` per second; records when its handler starts.
#[derive(Serialize, Deserialize)]
struct Limited {
    rate: u32,
}

#[job(name = "rules.limited", tries = 1)]
impl Job for Limited {
    fn middleware(&self) -> Vec<Layer> {
        vec![RateLimited::new(Limit::per_second(self.rate).named("bench")).into()]
    }

    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        let at = wall_us();
        let queue = RedisQueue::default_handle()?;
        queue
            .query::<()>(redis::cmd("RPUSH").arg(STARTS).arg(at))
            .await?;
        Ok(())
    }
}

/// A job of `ms` milliseconds under a funnel of `slots`; records how many ran at its start.
#[derive(Serialize, Deserialize)]
struct Funneled {
    slots: u32,
    ms: u64,
}

#[job(name = "rules.funneled", tries = 1)]
impl Job for Funneled {
    fn middleware(&self) -> Vec<Layer> {
        let funnel = Funnel::named("bench").limit(self.slots);
        vec![funnel.release_after(Duration::from_millis(20)).into()]
    }

    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        let queue = RedisQueue::default_handle()?;
        let running: i64 = queue.query(redis::cmd("INCR").arg(RUNNING)).await?;
        queue
            .query::<()>(redis::cmd("RPUSH").arg(STARTS).arg(running))
            .await?;
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        queue.query::<()>(redis::cmd("DECR").arg(RUNNING)).await?;
        Ok(())
    }
}

/// Awaits `dispatch`; returns the microseconds it took.
async fn timed<F>(dispatch: F) -> Result<f64, String>
where
    F: std::future::IntoFuture<Output = redjob::Result<uuid::Uuid>>,
{
    let start = Instant::now();
    dispatch.await.map_err(|e| e.to_string())?;
    Ok(start.elapsed().as_secs_f64() * 1e6)
}

async fn dispatch(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    // Plain and unique dispatches alternate one by one, each going first every other time, so
    // that both see the same machine; a round's figures are the means of its dispatches.
    let (mut plain, mut unique) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        flush(queue).await?;
        let (mut plain_us, mut unique_us) = (0.0, 0.0);
        for n in (round * ROUND) as u64..((round + 1) * ROUND) as u64 {
            let plain_job = || Plain { n }.dispatch().on_queue(QUEUE).via(queue);
            let unique_job = || Unique { n }.dispatch().on_queue(QUEUE).via(queue);
            if n % 2 == 0 {
                plain_us += timed(plain_job()).await?;
                unique_us += timed(unique_job()).await?;
            } else {
                unique_us += timed(unique_job()).await?;
                plain_us += timed(plain_job()).await?;
            }
        }
        plain.push(plain_us / ROUND as f64);
        unique.push(unique_us / ROUND as f64);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut out = Map::new();
    out.insert("dispatches".into(), json!(args.rounds * ROUND));
    out.insert("plain_us".into(), json!(round2(mean(&plain))));
    out.insert("unique_us".into(), json!(round2(mean(&unique))));
    out.insert("ratio".into(), json!(round2(mean(&unique) / mean(&plain))));
    let mut ratios: Vec<f64> = unique.iter().zip(&plain).map(|(u, p)| u / p).collect();
    ratios.sort_by(f64::total_cmp);
    out.insert(
        "ratio_median".into(),
        json!(round2(ratios[ratios.len() / 2])),
    );
    out.insert(
        "plain_rounds_us".into(),
        json!(plain.iter().map(|v| round2(*v)).collect::<Vec<_>>()),
    );
    out.insert(
        "unique_rounds_us".into(),
        json!(unique.iter().map(|v| round2(*v)).collect::<Vec<_>>()),
    );
    Ok(out)
}

/// Starts `count` worker processes on the benchmark's queue.
fn start_workers(args: &Args, count: usize) -> Vec<Child> {
    (0..count)
        .map(|_| {
            Command::new(std::env::current_exe().expect("the benchmark's own path"))
                .args(["--scenario", "worker", "--redis", &args.redis])
                .args(["--concurrency", &args.concurrency.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .expect("cannot start a worker process")
        })
        .collect()
}

fn stop_workers(workers: Vec<Child>) {
    for mut worker in workers {
        let _ = worker.kill();
        let _ = worker.wait();
    }
}

async fn push_all<J: Job>(queue: &RedisQueue, jobs: impl Iterator<Item = J>) -> Result<(), String> {
    let mut bulk = Bulk::via(queue);
    for job in jobs {
        bulk.add(PendingDispatch::new(job).on_queue(QUEUE))
            .map_err(|e| e.to_string())?;
        if bulk.len() == ROUND {
            std::mem::replace(&mut bulk, Bulk::via(queue))
                .send()
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    bulk.send().await.map_err(|e| e.to_string())?;
    Ok(())
}

async fn starts(queue: &RedisQueue) -> Result<Vec<u64>, String> {
    let mut conn = queue.connection();
    conn.lrange(STARTS, 0, -1).await.map_err(|e| e.to_string())
}

async fn rate(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    flush(queue).await?;
    // A backlog the limit never lets run dry.
    let backlog = (args.rate as u64 * args.seconds * 5 / 4) as usize;
    push_all(queue, (0..backlog).map(|_| Limited { rate: args.rate })).await?;
    let workers = start_workers(args, args.workers);
    // The limit's own record of its admissions, on Redis's clock: each stays in the window's
    // sorted set for one window, so reading it every 100 ms sees every one.
    let admissions = Arc::new(Mutex::new(HashMap::<String, f64>::new()));
    let watcher = {
        let (queue, admissions) = (queue.clone(), admissions.clone());
        let key = queue.keys().limit("bench", "");
        tokio::spawn(async move {
            let mut conn = queue.connection();
            loop {
                let seen: Vec<(String, f64)> = conn
                    .zrange_withscores(&key, 0, -1)
                    .await
                    .unwrap_or_default();
                admissions.lock().unwrap().extend(seen);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let span = args.seconds * 1_000_000;
    let first = loop {
        if let Some(first) = starts(queue).await?.into_iter().min() {
            break first;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    while wall_us() < first + span + 500_000 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_workers(workers);
    watcher.abort();
    let mut all = starts(queue).await?;
    all.sort_unstable();
    let within: Vec<u64> = all.into_iter().filter(|t| *t < first + span).collect();
    let mut admitted: Vec<u64> = admissions
        .lock()
        .unwrap()
        .values()
        .map(|t| *t as u64)
        .collect();
    admitted.sort_unstable();
    let first_admission = admitted.first().copied().unwrap_or(0);
    admitted.retain(|t| *t < first_admission + span);
    let expected = args.rate as f64 * args.seconds as f64;
    let per_sec = |n: usize| round2(n as f64 / args.seconds as f64);
    let mut out = Map::new();
    out.insert("rate".into(), json!(args.rate));
    out.insert("workers".into(), json!(args.workers));
    out.insert("seconds".into(), json!(args.seconds));
    out.insert("admitted".into(), json!(admitted.len()));
    out.insert("admitted_per_sec".into(), json!(per_sec(admitted.len())));
    out.insert(
        "admitted_vs_rate".into(),
        json!((admitted.len() as f64 / expected * 10_000.0).round() / 10_000.0),
    );
    out.insert(
        "most_admitted_in_any_window".into(),
        json!(most_within(&admitted, 1_000_000)),
    );
    out.insert("handler_starts".into(), json!(within.len()));
    out.insert(
        "most_handler_starts_in_any_second".into(),
        json!(most_within(&within, 1_000_000)),
    );
    Ok(out)
}

/// The most of the sorted times `times` within any span of `span` (half open).
fn most_within(times: &[u64], span: u64) -> usize {
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|t| **t < times[i] + span)
                .count()
        })
        .max()
        .unwrap_or(0)
}

async fn funnel(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    flush(queue).await?;
    let jobs = (0..args.jobs).map(|_| Funneled {
        slots: args.slots,
        ms: 20,
    });
    push_all(queue, jobs).await?;
    let started = Instant::now();
    let workers = start_workers(args, args.workers);
    let mut conn = queue.connection();
    while conn
        .llen::<_, usize>(STARTS)
        .await
        .map_err(|e| e.to_string())?
        < args.jobs
    {
        if started.elapsed() > Duration::from_secs(600) {
            stop_workers(workers);
            return Err("the funnel did not drain in 10 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    stop_workers(workers);
    let peak = starts(queue).await?.into_iter().max().unwrap_or(0);
    let mut out = Map::new();
    out.insert("slots".into(), json!(args.slots));
    out.insert("workers".into(), json!(args.workers));
    out.insert("jobs".into(), json!(args.jobs));
    out.insert("most_running_at_once".into(), json!(peak));
    out.insert(
        "jobs_per_sec".into(),
        json!(round2(args.jobs as f64 / secs)),
    );
    Ok(out)
}

async fn work(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let config = WorkerConfig {
        queues: vec![QUEUE.to_owned()],
        concurrency: args.concurrency,
        retry_after: Duration::from_secs(30),
        timeout: Some(Duration::from_secs(10)),
        ..WorkerConfig::default()
    };
    let worker = Worker::new(config, queue.clone()).map_err(|e| e.to_string())?;
    worker.run().await.expect("the worker starts");
    Ok(Map::new())
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = runtime.block_on(async {
        let queue = RedisQueue::open(&args.redis).map_err(|e| e.to_string())?;
        match args.scenario.as_str() {
            "dispatch" => dispatch(&args, &queue).await,
            "rate" => rate(&args, &queue).await,
            "funnel" => funnel(&args, &queue).await,
            "worker" => work(&args, &queue).await,
            other => Err(format!("unknown scenario {other:?}")),
        }
    });
    if args.scenario == "worker" {
        return;
    }
    let line = common::result_line(&args.scenario, result);
    println!("{}", Value::Object(line));
}
