//! A workflow example: a chain (import a file, index it, mail its owner) and a batch of row
//! imports with `then`, `catch` and `finally` callbacks, run by an in-process worker that
//! prints the batch's progress. Uses the Redis named by `REDIS_URL`:
//! `./scripts/demo workflow`, or `cargo run -p examples --bin workflow -- --rows 500 --fail`.

use anyhow::{bail, Context};
use clap::Parser;
use examples::{Caught, Step, STEPS_KEY};
use redjob::{Batch, Chain};
use redjob_worker::{Worker, WorkerConfig};
use std::time::{Duration, Instant};

const QUEUE: &str = "workflow";

/// Runs a chain and a batch of example steps.
#[derive(Debug, Parser)]
#[command(name = "workflow")]
struct Args {
    /// Rows in the batch.
    #[arg(long, default_value_t = 200)]
    rows: usize,
    /// Make one row fail: the batch is cancelled and `catch` runs instead of `then`.
    #[arg(long)]
    fail: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    examples::link();
    let args = Args::parse();
    let url = redjob::queue::redis_url_from_env();
    let queue = examples::fresh_demo(QUEUE, STEPS_KEY)
        .await
        .with_context(|| format!("cannot reach Redis at {url}"))?;

    let step = |label: &str, ms: u64| {
        Step {
            label: label.to_owned(),
            ms,
            ..Step::default()
        }
        .dispatch()
    };
    let chain = Chain::new(step("import file", 200))
        .then(step("index file", 200))
        .then(step("mail owner", 50))
        .catch(
            Caught {
                label: "file".into(),
            }
            .dispatch(),
        )
        .on_queue(QUEUE)
        .dispatch()
        .await?;
    println!("Chain {chain}: import file -> index file -> mail owner");
    let failing = args.rows / 2;
    let rows = (0..args.rows).map(|n| {
        let mut row = Step {
            label: format!("row {n}"),
            ms: 20,
            ..Step::default()
        };
        row.fail = args.fail && n == failing;
        row.dispatch()
    });
    let batch = Batch::new()
        .name("import rows")
        .jobs(rows)
        .then(
            Caught {
                label: "rows imported".into(),
            }
            .dispatch(),
        )
        .catch(
            Caught {
                label: "a row failed".into(),
            }
            .dispatch(),
        )
        .finally(
            Caught {
                label: "rows settled".into(),
            }
            .dispatch(),
        )
        .on_queue(QUEUE)
        .dispatch()
        .await?;
    println!(
        "Batch {batch}: {} rows with then, catch and finally\n",
        args.rows
    );

    let config = WorkerConfig {
        queues: vec![QUEUE.to_owned()],
        concurrency: 20,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(config, queue.clone())?;
    let stop = worker.stop_token();
    let running = tokio::spawn(worker.run());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = queue.batch(batch).await?.context("the batch's record")?;
        println!(
            "  batch {:>3}%  {} of {} settled, {} failed{}",
            status.progress(),
            status.processed(),
            status.total,
            status.failed,
            if status.cancelled() {
                ", cancelled"
            } else {
                ""
            }
        );
        if status.finished() && queue.size(QUEUE).await?.total() == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("the workflow did not settle within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.cancel();
    running.await??;

    println!("\nWhat ran, in order (rows summed up):");
    let steps: Vec<String> = queue
        .query(redis::cmd("LRANGE").arg(STEPS_KEY).arg(0).arg(-1))
        .await?;
    let mut rows = 0;
    for entry in steps {
        let entry: serde_json::Value = serde_json::from_str(&entry)?;
        let label = entry["label"].as_str().unwrap_or("?");
        if label.starts_with("row ") {
            rows += 1;
        } else {
            println!("  {label}");
        }
    }
    let status = queue.batch(batch).await?.context("the batch's record")?;
    match status.cancelled() {
        true => println!(
            "  ... and {rows} of {} rows: the failed row cancelled the batch, and the rows not \
             started by then were skipped",
            status.total
        ),
        false => println!("  ... and {rows} rows"),
    }
    Ok(())
}
