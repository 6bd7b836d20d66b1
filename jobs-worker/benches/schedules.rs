//! Benchmark of the scheduler against a real Redis, one JSON line per run on stdout.
//!
//! ```text
//! cargo bench -p redjob-worker --bench schedules -- --scenario lateness --workers 3 --seconds 60 --redis URL
//! cargo bench -p redjob-worker --bench schedules -- --scenario idle --schedules 1000 --seconds 30 --redis URL
//! ```
//!
//! `lateness`: N worker processes (children of this one) keep one per-second schedule for S
//! seconds and run its jobs; each tick's job is found by its uuid (`schedule::tick_uuid`), and
//! reported are the ticks fired, those fired twice or missed, and how late each job started
//! after its tick (wall clock, ms). `idle`: one worker process keeps K schedules that do not
//! fire during the run (hourly, spread over the hour) on an empty queue, and reports its CPU
//! over S seconds as a share of one core, beside the same worker keeping none.

mod common;

use chrono::{DateTime, Utc};
use clap::Parser;
use common::{nearest_rank, own_cpu_seconds, round2, wall_us};
use redjob::schedule::{tick_uuid, Schedule};
use redjob::{job, Job, JobContext, JobResult, RedisQueue};
use redjob_worker::{Worker, WorkerConfig};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::Duration;

const QUEUE: &str = "bench-sched";
const RECORDS: &str = "bench-sched:records";

#[derive(Debug, Clone, Parser)]
struct Args {
    #[arg(long, default_value = "lateness")]
    scenario: String,
    #[arg(long, default_value_t = 3)]
    workers: usize,
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 1000)]
    schedules: usize,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    #[arg(long, hide = true)]
    bench: bool,
}

/// The scheduled job: records its uuid and when it started (wall clock, µs).
#[derive(Serialize, Deserialize)]
struct Tick {}

#[job(name = "bench.tick")]
impl Job for Tick {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let started_us = wall_us();
        let queue = RedisQueue::default_handle()?;
        let entry = format!("{} {started_us}", ctx.uuid());
        queue
            .query::<()>(redis::cmd("RPUSH").arg(RECORDS).arg(entry))
            .await?;
        Ok(())
    }
}

/// Runs one worker keeping the schedules for `seconds`; returns its CPU seconds over the last
/// `seconds - 2` (the first two are start-up).
async fn run_worker(args: &Args, queue: &RedisQueue) -> f64 {
    let config = WorkerConfig {
        queues: vec![QUEUE.to_owned()],
        concurrency: 4,
        schedule: true,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(config, queue.clone()).expect("a valid worker");
    let stop = worker.stop_token();
    let running = tokio::spawn(worker.run());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu = own_cpu_seconds();
    tokio::time::sleep(Duration::from_secs(args.seconds.saturating_sub(2).max(1))).await;
    let used = own_cpu_seconds() - cpu;
    stop.cancel();
    running
        .await
        .expect("the worker task")
        .expect("the worker starts");
    used
}

fn child(args: &Args, role: &str, schedules: usize) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().expect("this benchmark's path"))
        .args([
            "--scenario",
            role,
            "--seconds",
            &args.seconds.to_string(),
            "--schedules",
            &schedules.to_string(),
            "--redis",
            &args.redis,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start a worker process")
}

async fn scenario(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    match args.scenario.as_str() {
        "ticker" => {
            let every_second = Schedule::new("tick", Tick {}.dispatch().on_queue(QUEUE))
                .cron("* * * * * *")
                .map_err(|e| e.to_string())?;
            redjob::schedule::define(every_second);
            run_worker(args, queue).await;
        }
        "keeper" => {
            for n in 0..args.schedules {
                let hourly = Schedule::new(format!("s{n}"), Tick {}.dispatch().on_queue(QUEUE))
                    .cron(&format!("{} {} * * * *", n % 60, (n / 60) % 60))
                    .map_err(|e| e.to_string())?;
                redjob::schedule::define(hourly);
            }
            let cpu = run_worker(args, queue).await;
            out.insert("cpu_seconds".into(), json!(cpu));
        }
        "lateness" => {
            let started = Utc::now();
            let children: Vec<_> = (0..args.workers)
                .map(|_| child(args, "ticker", 1))
                .collect();
            for child in children {
                child.wait_with_output().map_err(|e| e.to_string())?;
            }
            let ended = Utc::now();
            let records: Vec<String> = queue
                .query(redis::cmd("LRANGE").arg(RECORDS).arg(0).arg(-1))
                .await
                .map_err(|e| e.to_string())?;
            let ticks: Vec<DateTime<Utc>> = (started.timestamp()..=ended.timestamp())
                .filter_map(|s| DateTime::from_timestamp(s, 0))
                .collect();
            let by_uuid: HashMap<String, DateTime<Utc>> = ticks
                .iter()
                .map(|tick| (tick_uuid("tick", *tick).to_string(), *tick))
                .collect();
            let mut runs: HashMap<String, usize> = HashMap::new();
            let mut late_ms = Vec::new();
            let mut late_by_tick: Vec<(i64, f64)> = Vec::new();
            for record in &records {
                let (uuid, started_us) = record.split_once(' ').unwrap_or_default();
                let Some(tick) = by_uuid.get(uuid) else {
                    continue;
                };
                *runs.entry(uuid.to_owned()).or_default() += 1;
                let started_us: i64 = started_us.parse().unwrap_or(0);
                let late = (started_us - tick.timestamp_micros()) as f64 / 1000.0;
                late_ms.push(late);
                late_by_tick.push((tick.timestamp(), late));
            }
            let first = runs.keys().filter_map(|u| by_uuid.get(u)).min().copied();
            let last = runs.keys().filter_map(|u| by_uuid.get(u)).max().copied();
            let span = match (first, last) {
                (Some(first), Some(last)) => (last - first).num_seconds() + 1,
                _ => 0,
            };
            late_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
            // The three latest jobs, as (seconds after the first tick, ms late).
            let first_tick = late_by_tick.iter().map(|(t, _)| *t).min().unwrap_or(0);
            late_by_tick.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
            let worst: Vec<(i64, f64)> = late_by_tick
                .iter()
                .take(3)
                .map(|(t, late)| (t - first_tick, round2(*late)))
                .collect();
            out.insert("latest_jobs".into(), json!(worst));
            let rank = |p: f64| nearest_rank(&late_ms, p);
            out.insert("workers".into(), json!(args.workers));
            out.insert("seconds".into(), json!(args.seconds));
            out.insert("ticks_fired".into(), json!(runs.len()));
            out.insert("ticks_between_first_and_last".into(), json!(span));
            out.insert(
                "ticks_fired_twice".into(),
                json!(runs.values().filter(|n| **n > 1).count()),
            );
            if !late_ms.is_empty() {
                out.insert("late_p50_ms".into(), json!(round2(rank(0.5))));
                out.insert("late_p99_ms".into(), json!(round2(rank(0.99))));
                out.insert(
                    "late_max_ms".into(),
                    json!(round2(late_ms[late_ms.len() - 1])),
                );
            }
        }
        "idle" => {
            let measure = |schedules: usize| -> Result<f64, String> {
                let output = child(args, "keeper", schedules)
                    .wait_with_output()
                    .map_err(|e| e.to_string())?;
                let line: Value =
                    serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())?;
                let cpu = line["cpu_seconds"].as_f64().ok_or("no cpu_seconds")?;
                // The child measures over all but its first two seconds.
                let window = args.seconds.saturating_sub(2).max(1) as f64;
                Ok(cpu / window * 100.0)
            };
            let none = measure(0)?;
            let many = measure(args.schedules)?;
            out.insert("schedules".into(), json!(args.schedules));
            out.insert("seconds".into(), json!(args.seconds));
            out.insert("cpu_percent_without".into(), json!(round2(none)));
            out.insert("cpu_percent_with".into(), json!(round2(many)));
            out.insert("scheduler_cpu_percent".into(), json!(round2(many - none)));
        }
        other => return Err(format!("unknown scenario {other:?}")),
    }
    Ok(out)
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = runtime.block_on(async {
        let queue = RedisQueue::open(&args.redis).map_err(|e| e.to_string())?;
        RedisQueue::set_default(queue.clone());
        scenario(&args, &queue).await
    });
    let line = common::result_line(&args.scenario, result);
    println!("{}", Value::Object(line));
}
