//! The `txn` scenario (feature `postgres`): dispatch inside a PostgreSQL transaction through
//! the outbox, as the peer kit defines it. With n = min(N, 5,000), on one connection:
//!
//! 1. n transactions that insert a row (`plain_tx_per_sec`);
//! 2. n transactions that insert a row and dispatch one job in it (`txn_per_sec`,
//!    `txn_cost_ratio` = plain / txn); no worker runs yet;
//! 3. a worker with an outbox relay starts: n / (its start to the n-th job's handler entry)
//!    (`relay_or_drain_per_sec`);
//! 4. after 1 s, 200 probes 20 ms apart: from the moment COMMIT returns to the probe's handler
//!    entry (`commit_to_start_*_ms`).
//!
//! PostgreSQL's durability settings are left as the server has them.
//!
//! And `relay`: N jobs committed into the outbox untimed (bulk dispatches of 1,000 in a
//! transaction each), then one worker with a relay, timed from its start to the N-th handler
//! entry (`jobs_per_sec`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use redjob::outbox::{Outbox, Relay};
use redjob::{job, Bulk, Job, JobContext, JobResult, RedisQueue};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sqlx::{Connection, PgConnection};

use crate::common::{round2, wall_us};
use crate::jobs::tracker;
use crate::measure::{latency_fields, throughput};
use crate::run::{run_until_done, stopped, worker, Running};
use crate::{Args, QUEUE};

const MAX_TRANSACTIONS: usize = 5000;
const PROBES: usize = 200;
const PROBE_BOUND: Duration = Duration::from_secs(60);

/// The scenario's job: a backlog job counts itself; a probe records when it started.
#[derive(Serialize, Deserialize)]
struct Order {
    n: u64,
    probe: bool,
}

#[job(name = "peerkit.txn")]
impl Job for Order {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        if self.probe {
            let started_ms = wall_us() as f64 / 1000.0;
            probe_starts().lock().unwrap().insert(self.n, started_ms);
        } else {
            tracker().count();
        }
        Ok(())
    }
}

fn probe_starts() -> &'static Mutex<HashMap<u64, f64>> {
    static STARTS: OnceLock<Mutex<HashMap<u64, f64>>> = OnceLock::new();
    STARTS.get_or_init(Mutex::default)
}

fn pg_error(err: impl std::fmt::Display) -> String {
    format!("PostgreSQL: {err}")
}

/// Inserts an order in a transaction of its own, with its job when `job` is given.
async fn order(
    conn: &mut PgConnection,
    n: u64,
    job: Option<(&RedisQueue, bool)>,
) -> Result<(), String> {
    let mut tx = conn.begin().await.map_err(pg_error)?;
    sqlx::query("INSERT INTO orders (n, created) VALUES ($1, now())")
        .bind(n as i32)
        .execute(&mut *tx)
        .await
        .map_err(pg_error)?;
    if let Some((queue, probe)) = job {
        Order { n, probe }
            .dispatch()
            .on_queue(QUEUE)
            .via(queue)
            .in_transaction(&mut tx)
            .await
            .map_err(|err| err.to_string())?;
    }
    tx.commit().await.map_err(pg_error)
}

/// Runs `count` transactions; their rate per second.
async fn rate(
    conn: &mut PgConnection,
    count: usize,
    job: Option<&RedisQueue>,
) -> Result<(f64, f64), String> {
    let start = Instant::now();
    for n in 0..count as u64 {
        order(conn, n, job.map(|queue| (queue, false))).await?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((count as f64 / secs, secs))
}

/// Creates the default outbox if missing and empties it: rows an interrupted run left would be
/// relayed and counted by this one.
async fn empty_outbox(conn: &mut PgConnection) -> Result<(), String> {
    let outbox = Outbox::default();
    outbox
        .create_table(&mut *conn)
        .await
        .map_err(|e| e.to_string())?;
    let empty = format!("TRUNCATE {}", outbox.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(empty))
        .execute(conn)
        .await
        .map_err(pg_error)?;
    Ok(())
}

/// Starts a worker with an outbox relay of `url`'s database; the time from its start to the
/// handler entry of the `jobs`-th backlog job, and the running worker.
async fn relayed(
    args: &Args,
    queue: &RedisQueue,
    url: &str,
    jobs: usize,
) -> Result<(f64, Running), String> {
    let pool = sqlx::PgPool::connect(url).await.map_err(pg_error)?;
    let worker = worker(args, queue).relay(Relay::new(pool, queue.clone()));
    run_until_done(args, worker, jobs).await
}

pub(crate) async fn relay(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let url = args.pg.as_deref().ok_or("relay needs --pg URL")?;
    let mut conn = PgConnection::connect(url).await.map_err(pg_error)?;
    empty_outbox(&mut conn).await?;
    for first in (0..args.jobs).step_by(1000) {
        let mut bulk = Bulk::via(queue);
        for n in first..(first + 1000).min(args.jobs) {
            let job = Order {
                n: n as u64,
                probe: false,
            };
            bulk.add(job.dispatch().on_queue(QUEUE))
                .map_err(|e| e.to_string())?;
        }
        let mut tx = conn.begin().await.map_err(pg_error)?;
        bulk.in_transaction(&mut tx)
            .await
            .map_err(|e| e.to_string())?;
        tx.commit().await.map_err(pg_error)?;
    }
    let (secs, (stop, running)) = relayed(args, queue, url, args.jobs).await?;
    stop.cancel();
    stopped(running).await?;
    let mut out = throughput(args.jobs, secs);
    out.insert("concurrency".into(), json!(args.concurrency));
    Ok(out)
}

pub(crate) async fn txn(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    let url = args.pg.as_deref().ok_or("txn needs --pg URL")?;
    let n = args.jobs.min(MAX_TRANSACTIONS);
    let mut conn = PgConnection::connect(url).await.map_err(pg_error)?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS orders (id bigserial, n int, created timestamptz); \
         TRUNCATE orders",
    )
    .execute(&mut conn)
    .await
    .map_err(pg_error)?;
    empty_outbox(&mut conn).await?;

    let (plain_per_sec, _) = rate(&mut conn, n, None).await?;
    let (txn_per_sec, txn_secs) = rate(&mut conn, n, Some(queue)).await?;

    // The worker and its relay: the backlog, timed to its n-th handler entry.
    let (secs, (stop, running)) = relayed(args, queue, url, n).await?;
    let mut out = Map::new();
    out.insert(
        "relay_or_drain_per_sec".into(),
        json!((n as f64 / secs).round()),
    );
    out.insert("relay_or_drain_s".into(), json!(round2(secs)));

    // Commit to handler start.
    tokio::time::sleep(Duration::from_secs(1)).await;
    probe_starts().lock().unwrap().clear();
    let mut committed = HashMap::with_capacity(PROBES);
    let first = Instant::now();
    for k in 0..PROBES as u64 {
        order(&mut conn, k, Some((queue, true))).await?;
        committed.insert(k, wall_us() as f64 / 1000.0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while probe_starts().lock().unwrap().len() < PROBES && first.elapsed() < PROBE_BOUND {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    stopped(running).await?;
    let starts = probe_starts().lock().unwrap().clone();
    let latencies: Vec<f64> = starts
        .iter()
        .filter_map(|(k, started)| committed.get(k).map(|at| started - at))
        .collect();
    for (field, value) in latency_fields(&latencies) {
        out.insert(format!("commit_to_start_{field}"), value);
    }
    out.insert("completed".into(), json!(latencies.len()));
    if latencies.len() < PROBES {
        out.insert(
            "error".into(),
            json!(format!("{} of {PROBES} probes ran", latencies.len())),
        );
    }
    out.insert("jobs".into(), json!(n));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("plain_tx_per_sec".into(), json!(plain_per_sec.round()));
    out.insert("txn_per_sec".into(), json!(txn_per_sec.round()));
    out.insert(
        "txn_cost_ratio".into(),
        json!((plain_per_sec / txn_per_sec * 1000.0).round() / 1000.0),
    );
    out.insert("txn_elapsed_s".into(), json!(round2(txn_secs)));
    let settings: (String, String, String) = sqlx::query_as(
        "SELECT current_setting('server_version'), current_setting('fsync'), \
         current_setting('synchronous_commit')",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(pg_error)?;
    out.insert(
        "pg".into(),
        json!(format!(
            "server_version={} fsync={} synchronous_commit={}",
            settings.0, settings.1, settings.2
        )),
    );
    Ok(out)
}
