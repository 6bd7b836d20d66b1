//! Benchmark of a large failed-job store on a private redis-server: how long a page takes
//! through the library, the `jobsctl` command and the dashboard's API, and whether a "retry all"
//! of every record keeps each Redis call under 20 ms (SLOWLOG at that threshold) and pushes
//! every job back exactly once.
//!
//! ```text
//! cargo bench -p tests --bench failed_store                     # 100,000 records
//! cargo bench -p tests --bench failed_store -- --records 20000
//! ```
//!
//! The records are written straight into the store in the workers' format
//! (`tests::failed_store`), past the store's usual bound of 10,000 (workers prune on failure;
//! nothing prunes here). One JSON line on stdout per measurement, a summary on stderr.

use redis::AsyncCommands;
use redjob::admin::{Admin, FailedFilter, FailedSelection};
use serde_json::json;
use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};
use tests::dashboard::Dashboard;
use tests::failed_store::{seed_failed, Seeded};
use tests::TestRedis;

/// Times each page request is repeated.
const TRIES: usize = 20;

/// The SLOWLOG threshold: calls slower than this are logged.
const SLOW_MICROS: u64 = 20_000;

fn records_arg() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--records")
        .and_then(|at| args.get(at + 1))
        .map(|n| n.parse().expect("--records takes a number"))
        .unwrap_or(100_000)
}

/// Median and largest of some durations, in milliseconds.
fn summary(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
    (ms(times[times.len() / 2]), ms(*times.last().unwrap()))
}

fn report(what: &str, how: &str, times: Vec<Duration>, extra: serde_json::Value) {
    let (median, max) = summary(times);
    let line = json!({ "bench": "failed_store", "measure": what, "via": how, "median_ms": median, "max_ms": max, "extra": extra });
    println!("{line}");
    eprintln!("{what:<40} {how:<10} median {median:>7.2} ms   max {max:>7.2} ms");
}

fn main() {
    let records = records_arg();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let redis = TestRedis::start();
    runtime.block_on(run(&redis, records));
}

async fn run(redis: &TestRedis, count: usize) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let start = 1_793_491_200.0;
    let mut records: Vec<Seeded> = (0..count).map(|n| Seeded::nth(n, start)).collect();
    // Three rare records, one near the oldest end.
    for n in [count / 2, count / 3, 5] {
        records[n].exception = format!("needle in the store {n}");
    }
    let seeding = Instant::now();
    seed_failed(&queue, &records).await;
    eprintln!(
        "seeded {count} failed jobs in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    let mut conn = redis.conn().await;

    // Pages through the library.
    let filters: Vec<(&str, FailedFilter)> = vec![
        ("newest page", FailedFilter::default()),
        (
            "queue q1",
            FailedFilter {
                queue: Some("q1".into()),
                ..Default::default()
            },
        ),
        (
            "job Invoice + tag vip",
            FailedFilter {
                job: Some("Invoice".into()),
                tag: Some("vip".into()),
                ..Default::default()
            },
        ),
        (
            "text host-7 (attempt 9",
            FailedFilter {
                text: Some("host-7 (attempt 9".into()),
                ..Default::default()
            },
        ),
        (
            "rare text needle",
            FailedFilter {
                text: Some("needle".into()),
                ..Default::default()
            },
        ),
    ];
    for (name, filter) in &filters {
        let mut times = Vec::new();
        let mut found = 0;
        for _ in 0..TRIES {
            let started = Instant::now();
            let page = admin.failed_page(filter, None).await.expect("a page");
            times.push(started.elapsed());
            found = page.entries.len();
        }
        report(name, "library", times, json!({ "found": found }));
    }
    // The last page, reached through the cursors of every page before it.
    let mut after: Option<String> = None;
    let mut times = Vec::new();
    loop {
        let started = Instant::now();
        let page = admin
            .failed_page(&FailedFilter::default(), after.as_deref())
            .await
            .expect("a page");
        times.push(started.elapsed());
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let pages = times.len();
    report(
        "every page of 50, newest to oldest",
        "library",
        times,
        json!({ "pages": pages }),
    );

    // The same pages through the dashboard's API and the jobsctl command.
    let program = env!("CARGO_BIN_EXE_test_jobs");
    let dash = Dashboard::start(program, redis.url(), &[], &[]);
    for (name, query) in [
        ("newest page", ""),
        ("queue q1", "queue=q1"),
        ("job Invoice + tag vip", "job=Invoice&tag=vip"),
        ("rare text needle", "text=needle"),
    ] {
        let path = format!("/api/failed?{query}");
        let mut times = Vec::new();
        for _ in 0..TRIES {
            let started = Instant::now();
            let response = tests::http::get(&dash.addr, &path).expect("the dashboard answers");
            times.push(started.elapsed());
            assert_eq!(response.status, 200, "{}", response.body);
        }
        report(name, "api", times, json!({}));
    }
    for (name, args) in [
        ("newest page", vec!["failed"]),
        ("queue q1", vec!["failed", "--queue", "q1"]),
        ("rare text needle", vec!["failed", "--search", "needle"]),
    ] {
        let mut times = Vec::new();
        for _ in 0..TRIES {
            let started = Instant::now();
            let output = Command::new(program)
                .args(["--redis", redis.url()])
                .args(&args)
                .output()
                .expect("jobsctl runs");
            times.push(started.elapsed());
            assert!(output.status.success(), "{output:?}");
        }
        report(
            name,
            "jobsctl",
            times,
            json!({ "includes": "process start" }),
        );
    }

    // Retry every record, with SLOWLOG logging every call over 20 ms.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(SLOW_MICROS)
        .query_async(&mut conn)
        .await
        .expect("CONFIG SET");
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(&mut conn)
        .await
        .expect("SLOWLOG RESET");
    let started = Instant::now();
    let retried = admin
        .retry(&FailedSelection::All)
        .await
        .expect("the retry runs");
    let took = started.elapsed();
    let slow: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(100)
        .query_async(&mut conn)
        .await
        .expect("SLOWLOG GET");
    let mut pushed = HashSet::new();
    let mut duplicates = 0;
    for name in ["q0", "q1", "q2"] {
        let payloads: Vec<String> = conn
            .lrange(&queue.queue_keys(name).ready, 0, -1)
            .await
            .expect("LRANGE");
        for payload in payloads {
            let payload: serde_json::Value = serde_json::from_str(&payload).expect("JSON");
            if !pushed.insert(payload["uuid"].as_str().unwrap().to_owned()) {
                duplicates += 1;
            }
        }
    }
    let left = admin.failed_count().await.expect("ZCARD");
    let line = json!({
        "bench": "failed_store", "measure": "retry all", "records": count,
        "retried": retried.retried.len(), "seconds": took.as_secs_f64(),
        "slowlog_over_20ms": slow.len(), "pushed_distinct": pushed.len(),
        "pushed_twice": duplicates, "left_in_store": left,
    });
    println!("{line}");
    eprintln!(
        "retry all: {} of {count} retried in {:.1} s; {} calls over 20 ms in SLOWLOG; {} distinct jobs pushed, {duplicates} pushed twice, {left} left in the store",
        retried.retried.len(),
        took.as_secs_f64(),
        slow.len(),
        pushed.len()
    );
    if !slow.is_empty() {
        eprintln!("SLOWLOG: {slow:?}");
    }
}
