//! Dispatches example jobs:
//! `cargo run --bin dispatch -- <noop|sleep|block|flaky|panic|record|rebuild|countdown> [--count N]
//! [--delay SECS] [--queue Q] [--group G] [--ms MS] [--fail-times K] [--shop N]`.

use anyhow::Context;
use clap::{Parser, ValueEnum};
use examples::{now_ms, Block, Countdown, Flaky, Noop, Panic, RebuildIndex, Record, Sleep};
use redjob::{Bulk, Dispatched, Job, PendingDispatch, RedisQueue};
use std::time::Duration;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Noop,
    Sleep,
    Block,
    Flaky,
    Panic,
    Record,
    /// A unique job, one per shop: a second dispatch for a shop is refused while one is queued
    /// or running.
    Rebuild,
    /// A tracked job of 100 steps of --ms milliseconds that reports its progress and stops when
    /// cancelled: watch it with `jobsctl status UUID`, stop it with `jobsctl cancel UUID`.
    Countdown,
}

/// Pushes example jobs onto a queue.
#[derive(Debug, Parser)]
#[command(name = "dispatch")]
struct Args {
    /// Which example job to dispatch.
    kind: Kind,
    /// How many jobs.
    #[arg(long, default_value_t = 1)]
    count: usize,
    /// Delay in seconds (fractions allowed).
    #[arg(long)]
    delay: Option<f64>,
    /// Queue to push to.
    #[arg(long, default_value = redjob::DEFAULT_QUEUE)]
    queue: String,
    /// Milliseconds the sleep job sleeps, or the block job blocks its thread.
    #[arg(long, default_value_t = 100)]
    ms: u64,
    /// Attempts the flaky job fails before it succeeds.
    #[arg(long, default_value_t = 2)]
    fail_times: u32,
    /// The shop of a rebuild job (its unique id).
    #[arg(long, default_value_t = 1)]
    shop: u64,
    /// The group of the queue the jobs wait in (docs/groups.md; default: the queue's own
    /// list).
    #[arg(long)]
    group: Option<String>,
    /// Attempts allowed (default: the worker's --tries).
    #[arg(long)]
    tries: Option<u32>,
    /// Redis URL.
    #[arg(long, env = "REDIS_URL", default_value = redjob::queue::DEFAULT_REDIS_URL)]
    redis: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let queue = RedisQueue::open(&args.redis)?;
    let delay = args
        .delay
        .map(|d| Duration::try_from_secs_f64(d.max(0.0)))
        .transpose()
        .context("--delay must be a number of seconds")?;
    let mut bulk = Bulk::via(&queue);
    for _ in 0..args.count {
        match args.kind {
            Kind::Noop => add(&mut bulk, Noop {}.dispatch(), &args, delay)?,
            Kind::Sleep => add(&mut bulk, Sleep { ms: args.ms }.dispatch(), &args, delay)?,
            Kind::Block => add(&mut bulk, Block { ms: args.ms }.dispatch(), &args, delay)?,
            Kind::Flaky => add(
                &mut bulk,
                Flaky {
                    fail_times: args.fail_times,
                }
                .dispatch(),
                &args,
                delay,
            )?,
            Kind::Panic => add(&mut bulk, Panic {}.dispatch(), &args, delay)?,
            Kind::Rebuild => {
                let job = RebuildIndex {
                    shop: args.shop,
                    ms: args.ms,
                    fail_first: 0,
                };
                add(&mut bulk, job.dispatch(), &args, delay)?
            }
            Kind::Countdown => {
                let job = Countdown {
                    steps: 100,
                    step_ms: args.ms,
                    mode: "stop".into(),
                };
                add(&mut bulk, job.dispatch(), &args, delay)?
            }
            Kind::Record => {
                let due_ms = now_ms() + delay.map_or(0, |d| d.as_millis() as u64);
                add(&mut bulk, Record { due_ms }.dispatch(), &args, delay)?
            }
        }
    }
    let uuids = bulk
        .send()
        .await
        .with_context(|| format!("cannot dispatch to {}", args.redis))?;
    for sent in &uuids {
        match sent {
            Dispatched::Queued(uuid) => println!("{uuid}"),
            Dispatched::Duplicate(duplicate) => eprintln!("not dispatched: {duplicate}"),
        }
    }
    let queued = uuids.iter().filter(|sent| !sent.is_duplicate()).count();
    eprintln!(
        "dispatched {queued} {:?} job(s) to queue {:?}{}",
        args.kind,
        args.queue,
        match uuids.len() - queued {
            0 => String::new(),
            duplicates => format!(" ({duplicates} refused as duplicates)"),
        }
    );
    Ok(())
}

fn add<J: Job>(
    bulk: &mut Bulk,
    dispatch: PendingDispatch<J>,
    args: &Args,
    delay: Option<Duration>,
) -> anyhow::Result<()> {
    let mut dispatch = dispatch.on_queue(&args.queue);
    if let Some(delay) = delay {
        dispatch = dispatch.delay(delay);
    }
    if let Some(group) = &args.group {
        dispatch = dispatch.group(group);
    }
    if let Some(tries) = args.tries {
        dispatch = dispatch.tries(tries);
    }
    bulk.add(dispatch)?;
    Ok(())
}
