//! The demo: dispatches a few example jobs (immediate, delayed, one that succeeds on its third
//! attempt, one that ends in the failed-job store), runs a worker until they are all settled,
//! and prints what happened. Uses the Redis named by `REDIS_URL`.

use anyhow::{bail, Context};
use examples::{now_ms, Flaky, Noop, Panic, Record, Sleep, RECORDS_KEY};
use redjob_worker::{Worker, WorkerConfig};
use std::time::{Duration, Instant};

const QUEUE: &str = "demo";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    examples::link();
    redjob_worker::logging::init(false);
    let url = redjob::queue::redis_url_from_env();
    let queue = examples::fresh_demo(QUEUE, RECORDS_KEY)
        .await
        .with_context(|| format!("cannot reach Redis at {url}"))?;

    println!("Dispatching to queue {QUEUE:?} on {url}:");
    let noop = Noop {}.dispatch().on_queue(QUEUE).await?;
    println!("  noop    {noop}  runs now");
    let delay = Duration::from_secs(2);
    let due_ms = now_ms() + delay.as_millis() as u64;
    let record = Record { due_ms }
        .dispatch()
        .on_queue(QUEUE)
        .delay(delay)
        .await?;
    println!("  record  {record}  delayed by 2 s");
    let sleep = Sleep { ms: 300 }.dispatch().on_queue(QUEUE).await?;
    println!("  sleep   {sleep}  sleeps 300 ms");
    let flaky = Flaky { fail_times: 2 }
        .dispatch()
        .on_queue(QUEUE)
        .tries(3)
        .backoff([1, 1])
        .await?;
    println!("  flaky   {flaky}  fails twice, then succeeds (tries 3, backoff 1 s)");
    let panic = Panic {}.dispatch().on_queue(QUEUE).tries(2).await?;
    println!("  panic   {panic}  panics every time (tries 2)");
    println!("\nWorker log:");

    let config = WorkerConfig {
        queues: vec![QUEUE.to_owned()],
        ..WorkerConfig::default()
    };
    let worker = Worker::new(config, queue.clone())?;
    let stop = worker.stop_token();
    let stats = worker.stats();
    let running = tokio::spawn(worker.run());

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let size = queue.size(QUEUE).await?;
        if size.total() == 0 && queue.failed_job(&panic.to_string()).await?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            bail!("the demo's jobs did not settle within 30 s: {size:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    running.await??;

    println!("\nWhat happened:");
    println!(
        "  the worker ran {} attempts; {} job went to the failed store",
        stats.processed(),
        stats.failed()
    );
    let records: Vec<String> = queue
        .query(redis::cmd("LRANGE").arg(RECORDS_KEY).arg(0).arg(-1))
        .await?;
    for entry in records {
        let entry: serde_json::Value = serde_json::from_str(&entry)?;
        let late =
            entry["started_ms"].as_i64().unwrap_or(0) - entry["due_ms"].as_i64().unwrap_or(0);
        println!("  record  started {late} ms after its due time");
    }
    let failed = queue
        .failed_job(&panic.to_string())
        .await?
        .context("the panic job's failed record")?;
    println!(
        "  panic   in failed_jobs since {}: {:?}",
        failed.failed_at, failed.exception
    );
    println!("  flaky   succeeded on its third attempt (not in failed_jobs, queue empty)");
    let size = queue.size(QUEUE).await?;
    println!(
        "  queue {QUEUE:?}: {} ready, {} delayed, {} reserved",
        size.ready, size.delayed, size.reserved
    );
    Ok(())
}
