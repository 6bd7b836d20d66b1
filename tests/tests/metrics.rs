//! The worker's Prometheus endpoint (`--metrics-addr`), scraped over HTTP from the real worker
//! binary: job counters by queue, job and outcome, the run time histogram, the running jobs,
//! and the queue gauges. Also the recent-jobs lists the worker publishes beside them. Each test
//! that talks to Redis runs on one server and on a Redis Cluster (`<test>::one_server`,
//! `<test>::cluster`).

use examples::{Noop, Panic, Sleep};
use redis::AsyncCommands;
use redjob::admin::Admin;
use redjob::admin::AttemptOutcome;
use std::collections::BTreeMap;
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{free_port, http, on_both_layouts, wait_for, wait_until, SentVia, Server, TestRedis};

const LONG: Duration = Duration::from_secs(30);

/// One sample of a scrape: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
                .collect();
            Some(Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().ok()?,
            })
        })
        .collect()
}

/// The value of the sample called `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

fn scrape(addr: &str) -> Option<(String, Vec<Sample>)> {
    let response = http::get(addr, "/metrics").ok()?;
    (response.status == 200).then(|| {
        let samples = parse(&response.body);
        (response.body, samples)
    })
}

async fn the_worker_exports_counters_runtimes_running_jobs_and_queue_sizes(redis: Server) {
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let _: () = conn.sadd(redis.keys().paused(), "held").await.unwrap();
    for _ in 0..2 {
        Noop {}.dispatch().on_queue("held").sent_via(&queue).await;
    }
    Noop {}.dispatch().delay(600).sent_via(&queue).await;
    for _ in 0..3 {
        Noop {}.dispatch().sent_via(&queue).await;
    }
    let failed = Panic {}.dispatch().sent_via(&queue).await;
    Sleep { ms: 20_000 }.dispatch().sent_via(&queue).await;

    let addr = format!("127.0.0.1:{}", free_port());
    let worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &[
            "--queue",
            "default,held",
            "--concurrency",
            "1",
            "--metrics-addr",
            &addr,
        ],
    );
    worker.wait_started().await;

    let labels = |job: &'static str, outcome: &'static str| {
        [("queue", "default"), ("job", job), ("outcome", outcome)]
    };
    let (text, samples) = wait_for(LONG, "the scrape shows every job and queue", || {
        let scraped = scrape(&addr).filter(|(_, samples)| {
            let counted =
                |job, outcome| value(samples, "jobs_processed_total", &labels(job, outcome));
            counted("noop", "done") == Some(3.0)
                && counted("panic", "failed") == Some(1.0)
                && value(samples, "jobs_running_jobs", &[]) == Some(1.0)
                // Gauges read after the jobs were taken (they are read every 5 s).
                && value(
                    samples,
                    "jobs_queue_jobs",
                    &[("queue", "default"), ("section", "reserved")],
                ) == Some(1.0)
                && value(
                    samples,
                    "jobs_queue_jobs",
                    &[("queue", "default"), ("section", "ready")],
                ) == Some(0.0)
        });
        async move { scraped }
    })
    .await;

    let gauge = |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels);
    let runtime = |suffix: &str, extra: &[(&str, &str)]| {
        let mut labels = vec![("queue", "default"), ("job", "noop")];
        labels.extend_from_slice(extra);
        gauge(&format!("jobs_runtime_seconds{suffix}"), &labels)
    };
    assert_eq!(runtime("_count", &[]), Some(3.0), "{text}");
    assert_eq!(runtime("_bucket", &[("le", "+Inf")]), Some(3.0), "{text}");
    assert_eq!(runtime("_bucket", &[("le", "60")]), Some(3.0), "{text}");
    let sum = runtime("_sum", &[]).expect("a runtime sum");
    assert!(
        sum > 0.0 && sum < 5.0,
        "three no-op jobs took {sum} s in all"
    );
    let panic_count = gauge(
        "jobs_runtime_seconds_count",
        &[("queue", "default"), ("job", "panic")],
    );
    assert_eq!(panic_count, Some(1.0), "{text}");
    assert_eq!(
        gauge("jobs_processed_total", &labels("noop", "failed")),
        None
    );
    assert_eq!(gauge("jobs_worker_concurrency", &[]), Some(1.0));

    let section = |queue: &'static str, section: &'static str| {
        gauge("jobs_queue_jobs", &[("queue", queue), ("section", section)])
    };
    assert_eq!(section("default", "ready"), Some(0.0), "{text}");
    assert_eq!(section("default", "delayed"), Some(1.0), "{text}");
    assert_eq!(section("held", "ready"), Some(2.0), "{text}");
    assert_eq!(section("held", "reserved"), Some(0.0), "{text}");
    assert_eq!(gauge("jobs_queue_paused", &[("queue", "held")]), Some(1.0));
    assert_eq!(
        gauge("jobs_queue_paused", &[("queue", "default")]),
        Some(0.0)
    );
    let oldest = gauge("jobs_queue_oldest_ready_seconds", &[("queue", "held")]);
    assert!(
        oldest.is_some_and(|age| (0.0..60.0).contains(&age)),
        "{oldest:?}"
    );
    for help in [
        "# HELP jobs_processed_total",
        "# TYPE jobs_runtime_seconds histogram",
        "# HELP jobs_queue_jobs",
    ] {
        assert!(text.contains(help), "no {help:?} in {text}");
    }

    // The same settled jobs are in the queue's recent-jobs list, newest first.
    let admin = Admin::new(queue.clone());
    let recent = wait_for(LONG, "the recent jobs are published", || {
        let admin = admin.clone();
        async move {
            let recent = admin.recent("default", 10).await.unwrap();
            (recent.len() == 4).then_some(recent)
        }
    })
    .await;
    let newest = &recent[0];
    assert_eq!(newest.uuid, failed.to_string());
    assert_eq!(
        (newest.job.as_str(), newest.outcome),
        ("panic", AttemptOutcome::Failed)
    );
    assert_eq!(newest.attempt, 1);
    assert!(newest
        .reason
        .as_deref()
        .unwrap()
        .contains("panicking on purpose"));
    assert_eq!(newest.worker, "default");
    assert!(recent[1..].iter().all(|job| job.job == "noop"
        && job.outcome == AttemptOutcome::Done
        && job.reason.is_none()));
}
on_both_layouts!(the_worker_exports_counters_runtimes_running_jobs_and_queue_sizes);

// The worker stops before it uses Redis (its connection is made on first use): one server is
// enough.
#[tokio::test]
async fn a_metrics_address_in_use_stops_the_worker_with_a_clear_error() {
    let redis = TestRedis::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--metrics-addr", &addr],
    );
    let status = worker.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(1));
    let message = format!("cannot serve Prometheus metrics on {addr}");
    wait_until(LONG, "the worker said why it stopped", || {
        let said = worker.lines().iter().any(|l| l.contains(&message));
        async move { said }
    })
    .await;
}

async fn the_worker_exports_the_pending_batches(redis: Server) {
    use examples::Step;
    use redjob::workflow::Batch;
    let queue = redis.queue();
    // One batch finishes; one waits on a queue the worker does not serve.
    Batch::new()
        .jobs((0..2).map(|n| Step::new(format!("done{n}")).dispatch()))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    Batch::new()
        .jobs((0..3).map(|n| Step::new(format!("idle{n}")).dispatch().on_queue("idle")))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let _worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--metrics-addr", &addr],
    );
    wait_for(
        LONG,
        "the batch gauges count the waiting batch only",
        || {
            let scraped = scrape(&addr).filter(|(_, samples)| {
                value(samples, "jobs_batches_pending", &[]) == Some(1.0)
                    && value(samples, "jobs_batch_jobs_pending", &[]) == Some(3.0)
            });
            async move { scraped }
        },
    )
    .await;
}
on_both_layouts!(the_worker_exports_the_pending_batches);

async fn a_worker_that_fires_a_schedule_exports_how_late_it_fired(redis: Server) {
    let addr = format!("127.0.0.1:{}", free_port());
    let _worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--schedule", "--queue", "sched", "--metrics-addr", &addr],
        &[("TEST_SCHEDULE", "tick:* * * * * *:last")],
    );
    let late = wait_for(LONG, "the lateness gauge is exported", || {
        let late = scrape(&addr).and_then(|(_, samples)| {
            value(
                &samples,
                "jobs_schedule_lateness_seconds",
                &[("schedule", "tick")],
            )
        });
        async move { late }
    })
    .await;
    assert!((0.0..1.0).contains(&late), "fired {late} s late");
}
on_both_layouts!(a_worker_that_fires_a_schedule_exports_how_late_it_fired);
