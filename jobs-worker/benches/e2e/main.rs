//! End-to-end benchmark of dispatch and the worker runtime against a real Redis, in the format
//! of the side-by-side peer kit (one JSON line per run on stdout).
//!
//! ```text
//! cargo bench -p redjob-worker --bench e2e -- --scenario drain --jobs 50000 --concurrency 50 \
//!     --redis redis://127.0.0.1:PORT
//! ```
//!
//! Scenarios, as the kit defines them: `enqueue` (bulk, chunks of 1,000), `enqueue_single`
//! (min(N, 10,000) awaited dispatches; also reports the time of an awaited PING through the
//! same connection, the floor under one dispatch), `drain` (N queued no-op jobs, one worker of
//! concurrency C, timed to the N-th handler call; peak RSS), `delayed` (2,000 jobs due over
//! 5 s onto an idle worker; lateness = handler start - due), `pickup` (200 pushes, 20 ms apart,
//! onto an idle worker), `batch` (one batch of N no-op jobs with a completion callback job,
//! created untimed in a child; timed to the callback's start; `callback_ms` is the callback's
//! start minus the last job's end). Our own: `chain` (a chain of N no-op links; the gaps from
//! one link's end to the next one's start), `backlog` (drain rate with 1,000,000 queued jobs against
//! 20,000), `io` (N jobs that each await 5 ms of simulated I/O at concurrency C, completed
//! exactly on time by a thread of its own: jobs/s against the ideal of C per 5 ms, beside the
//! same requests awaited first by C bare tasks, the host's own ceiling), and `migrate`
//! (1,000,000 jobs due at one instant: the
//! slowest script call, from SLOWLOG), and, built with `--features postgres`, `txn` (dispatch
//! in a PostgreSQL transaction through the outbox, relayed by the worker; `--pg URL`) and
//! `relay` (a backlog of N jobs committed into the outbox, relayed and run), and `wait` (the
//! kit's: 200 sequential dispatches of a tracked job onto an idle worker, each awaited to its
//! result; latency = result in hand - just before the dispatch). `drain --events` turns the
//! queue's events on first; `drain --progress K` drains tracked jobs that each report their
//! progress K times; `drain --groups G` drains jobs pushed in G groups of the queue
//! (docs/groups.md). `fairness` (ours): one group with a backlog of N jobs, then 999 other
//! groups (`--groups`) push 10 jobs each while it drains: the quiet jobs' waits, dispatch to
//! start, and the drain's rate; `--plain` puts every job in the queue's own list, the baseline.
//! `--durable R` makes the timed dispatches and the worker's acknowledgements durable (each
//! waits for R replicas), against a primary with replicas: `enqueue`, `enqueue_single` and
//! `drain` beside the same without it give what durability costs.
//! Redis memory per waiting job is measured from outside,
//! beside the peers', by `scripts/bench-footprint`.
//!
//! The worker is the real runtime (`redjob_worker::Worker`) with its default options but for
//! `--queue`, `--concurrency` and `--sleep`; no log subscriber is installed, as a production
//! worker logging at warning level would run. With `--state`, the worker is given application
//! state, which the no-op job reads to count itself (`ctx.try_state`): run beside a run
//! without it, the cost of state per job.

#[path = "../common/mod.rs"]
mod common;
mod io_device;
mod jobs;
mod measure;
mod run;
mod scenarios;

use clap::Parser;
use redjob::RedisQueue;
use serde_json::{json, Map, Value};
use std::time::Duration;

use crate::jobs::Reporting;
use crate::run::{error_text, push_grouped_noops, push_in_chunks, push_noops};
use crate::scenarios::drain::{backlog, drain};
use crate::scenarios::enqueue::{enqueue, enqueue_single};
use crate::scenarios::fairness::fairness;
use crate::scenarios::io::io;
use crate::scenarios::latency::{lateness, wait, Arrival};
use crate::scenarios::migrate::migrate;
use crate::scenarios::workflows::{batch, chain, dispatch_batch};

const QUEUE: &str = "peerkit";
const CHUNK: usize = 1000;
const SINGLE_MAX: usize = 10_000;
const DELAYED_JOBS: usize = 2000;
const PICKUP_JOBS: usize = 200;
const IDLE: Duration = Duration::from_secs(1);
const BOUND: Duration = Duration::from_secs(60);

/// Command line of the benchmark (cargo's own `--bench` flag is accepted and ignored).
#[derive(Debug, Clone, Parser)]
struct Args {
    #[arg(long, default_value = "drain")]
    scenario: String,
    #[arg(long, default_value_t = 50_000)]
    jobs: usize,
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    #[arg(long, default_value_t = 300.0)]
    timeout_s: f64,
    /// The worker's runtime threads, as the worker's `--threads` (default: one per CPU).
    #[arg(long)]
    threads: Option<std::num::NonZeroUsize>,
    /// The PostgreSQL database of the `txn` scenario (feature `postgres`).
    #[arg(long, env = "PG_URL")]
    pg: Option<String>,
    /// Give the worker application state, which the no-op job reads.
    #[arg(long)]
    state: bool,
    /// Record spans with an OpenTelemetry layer (feature `otel`), exported to nowhere, and
    /// dispatch every job inside a span, so each carries a trace context: the cost of tracing
    /// across the queue per job.
    #[arg(long)]
    otel: bool,
    /// drain: turn the queue's events on (stream of 100,000) before the worker starts.
    #[arg(long)]
    events: bool,
    /// drain: tracked jobs, each reporting its progress this many times (0: untracked no-ops).
    #[arg(long, default_value_t = 0)]
    progress: u32,
    /// drain: the jobs spread over this many groups of the queue, in even blocks (0: the
    /// queue's own list); fairness: how many groups (default 1,000).
    #[arg(long, default_value_t = 0)]
    groups: usize,
    /// fairness: every job in the queue's own list instead of groups, the baseline.
    #[arg(long)]
    plain: bool,
    /// Make dispatches and the worker's acknowledgements durable: each waits until this many
    /// replicas have it (`WAIT`, 1 s at most; 0: off). Against a primary with replicas.
    #[arg(long, default_value_t = 0)]
    durable: u32,
    #[arg(long, hide = true)]
    bench: bool,
}

impl Args {
    /// `--durable` as dispatch and acknowledgement durability.
    fn durability(&self) -> redjob::Durability {
        redjob::Durability::replicas(self.durable)
    }
}

async fn scenario(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    match args.scenario.as_str() {
        "prep" if args.progress > 0 => {
            let reports = args.progress;
            push_in_chunks(queue, args.jobs, |n| Reporting { n, reports })
                .await
                .map_err(error_text)?;
            Ok(Map::new())
        }
        "prep" if args.groups > 0 => {
            push_grouped_noops(queue, args.jobs, args.groups)
                .await
                .map_err(error_text)?;
            Ok(Map::new())
        }
        "prep" => {
            push_noops(queue, args.jobs).await.map_err(error_text)?;
            Ok(Map::new())
        }
        "fairness" => fairness(args, queue).await,
        "wait" => wait(args, queue).await,
        "prep-batch" => {
            dispatch_batch(queue, args.jobs).await?;
            Ok(Map::new())
        }
        "chain" => chain(args, queue).await,
        "batch" => batch(args, queue).await,
        "enqueue" => enqueue(args, queue).await,
        "enqueue_single" => enqueue_single(args, queue).await,
        "drain" => drain(args, queue).await,
        "io" => io(args, queue).await,
        "delayed" => lateness(args, queue, Arrival::Delayed).await,
        "pickup" => lateness(args, queue, Arrival::Pickup).await,
        "backlog" => backlog(args, queue).await,
        "migrate" => migrate(args, queue).await,
        #[cfg(feature = "postgres")]
        "txn" => scenarios::txn::txn(args, queue).await,
        #[cfg(feature = "postgres")]
        "relay" => scenarios::txn::relay(args, queue).await,
        other => Err(format!("unknown scenario {other:?}")),
    }
}

fn main() {
    let args = Args::parse();
    let _tracing = args.otel.then(otel::record_spans);
    let runtime = redjob_worker::async_runtime(args.threads).expect("a tokio runtime");
    let result = runtime.block_on(async {
        // The untimed preparation pushes ordinary jobs: only the timed part is durable.
        let durability = match args.scenario.starts_with("prep") {
            true => redjob::Durability::NONE,
            false => args.durability(),
        };
        let config = redjob::QueueConfig {
            durability,
            ..redjob::QueueConfig::default()
        };
        let queue = RedisQueue::with_config(&args.redis, config).map_err(|e| e.to_string())?;
        scenario(&args, &queue).await
    });
    if args.scenario.starts_with("prep") {
        if let Err(e) = result {
            eprintln!("prep failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut line = common::result_line(&args.scenario, result);
    let options = match args.threads {
        Some(threads) => format!("--threads {threads}"),
        None => "default options".to_owned(),
    };
    line.insert(
        "config".into(),
        json!(format!(
            "real worker runtime, {options}, no log subscriber; bulk dispatch in chunks of 1000"
        )),
    );
    line.insert(
        "version".into(),
        json!(format!("redjob {}", env!("CARGO_PKG_VERSION"))),
    );
    println!("{}", Value::Object(line));
}

/// `--otel`: spans recorded through OpenTelemetry and dropped at export.
#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    #[derive(Debug)]
    struct Discard;

    impl SpanExporter for Discard {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            Ok(())
        }
    }

    /// Installs the layer; the provider exports in batches, from its own thread, until dropped.
    pub(super) fn record_spans() -> SdkTracerProvider {
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(Discard)
            .build();
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")))
            .init();
        provider
    }
}

#[cfg(not(feature = "otel"))]
mod otel {
    pub(super) fn record_spans() {
        eprintln!("--otel needs the feature otel: cargo bench --features otel");
        std::process::exit(2);
    }
}
