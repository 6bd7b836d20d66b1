//! The dashboard in a real browser: Debian's headless chromium, driven by Playwright
//! (`tests/browser/dashboard.mjs`), against a real redis-server, worker and `jobsctl dashboard`
//! behind basic auth. The script checks the counts the page shows, searches (by job, text and
//! tag) and opens the failed job, checks that a queue waiting over its threshold is highlighted,
//! pauses a queue and retries the job with clicks; this test then checks Redis. It runs on one
//! server and on a Redis Cluster (`<test>::one_server`, `<test>::cluster`).
//!
//! It needs `/usr/bin/chromium` (Debian's package `chromium`) and `npm ci` in
//! `tests/browser`; `scripts/test` installs both. Without them it fails, saying what is missing.
//! The screenshot goes to `$DASHBOARD_SCREENSHOT`, else to cargo's test temporary directory.

use examples::{Flaky, Noop, Panic, Sleep};
use redis::AsyncCommands;
use redjob::Payload;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::dashboard::Dashboard;
use tests::worker_process::WorkerProcess;
use tests::{on_both_layouts, wait_until, SentVia, Server};

const LONG: Duration = Duration::from_secs(30);

fn chromium() -> PathBuf {
    let path = PathBuf::from(std::env::var("CHROMIUM").unwrap_or("/usr/bin/chromium".into()));
    assert!(
        path.exists(),
        "{} not found: install Debian's chromium (apt-get install chromium), as scripts/test does",
        path.display()
    );
    path
}

fn browser_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is not installed: run `npm ci` in {} (scripts/test does)",
        dir.display()
    );
    dir
}

async fn the_dashboard_shows_the_counts_and_retries_a_failed_job_with_a_click(redis: Server) {
    let chromium = chromium();
    let browser = browser_dir();
    let queue = redis.queue();
    for _ in 0..5 {
        Noop {}.dispatch().on_queue("emails").sent_via(&queue).await;
    }
    for _ in 0..2 {
        Noop {}
            .dispatch()
            .on_queue("emails")
            .delay(600)
            .sent_via(&queue)
            .await;
    }
    let failed = Panic {}
        .dispatch()
        .on_queue("emails")
        .tries(1)
        .tag("order:7")
        .sent_via(&queue)
        .await
        .to_string();
    // Released once, then done: 2 attempts.
    Flaky { fail_times: 1 }
        .dispatch()
        .on_queue("emails")
        .tries(2)
        .sent_via(&queue)
        .await;
    Sleep { ms: 120_000 }
        .dispatch()
        .on_queue("reports")
        .sent_via(&queue)
        .await;
    // A batch half done: two jobs on emails, two on a queue no worker serves.
    let batch = redjob::Batch::new()
        .name("nightly")
        .jobs((0..2).map(|_| Noop {}.dispatch().on_queue("emails")))
        .jobs((0..2).map(|_| Noop {}.dispatch().on_queue("idle")))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // A job on idle that has waited 5 minutes, over the threshold the worker sets for idle.
    tests::scenarios::old_ready_job(&redis, "idle", 300).await;
    let worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &[
            "--queue",
            "emails,reports",
            "--concurrency",
            "4",
            "--name",
            "mailer",
            "--wait",
            "idle=60,emails=600",
        ],
    );
    let (user, password) = ("operator", "correct horse");
    let auth = format!("{user}:{password}");
    let dash = Dashboard::start(
        env!("CARGO_BIN_EXE_test_jobs"),
        redis.url(),
        &["--auth", &auth],
        &[],
    );
    // Everything settled and published before the browser looks: 5 + 1 + 2 + 2 attempts.
    let authorization = "Basic b3BlcmF0b3I6Y29ycmVjdCBob3JzZQ=="; // operator:correct horse
    wait_until(LONG, "the worker published its 10 attempts", || {
        let overview = dash
            .send(tests::http::Request::get("/api/overview").header("Authorization", authorization))
            .json();
        async move { overview["processed_last_hour"] == 10 && overview["running"] == 1 }
    })
    .await;

    let screenshot = std::env::var("DASHBOARD_SCREENSHOT")
        .unwrap_or_else(|_| format!("{}/dashboard.png", env!("CARGO_TARGET_TMPDIR")));
    let output = tokio::task::spawn_blocking({
        let (url, failed, screenshot) = (dash.url(), failed.clone(), screenshot.clone());
        move || {
            Command::new("node")
                .arg("dashboard.mjs")
                .current_dir(&browser)
                .env("CHROMIUM", &chromium)
                .env("DASHBOARD_URL", url)
                .env("DASHBOARD_USER", user)
                .env("DASHBOARD_PASSWORD", password)
                .env("FAILED_UUID", failed)
                .env("EXPECT_PROCESSED", "10")
                .env("BATCH_ID", batch.to_string())
                .env("EXPECT_FAILED", "1")
                .env("SCREENSHOT", screenshot)
                .output()
                .expect("cannot run node: install Node.js")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the browser test failed ({}):\n{stdout}\n{stderr}\nworker log:\n{}",
        output.status,
        worker.lines().join("\n")
    );
    assert!(stdout.contains("every check passed"), "{stdout}");
    let png = std::fs::read(&screenshot).expect("the screenshot was saved");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{screenshot}"
    );

    // The click re-queued the job: back on emails (paused by the other click), attempts 0.
    let mut conn = redis.conn().await;
    let records: u64 = conn.hlen(redis.keys().failed_jobs()).await.unwrap();
    assert_eq!(records, 0);
    let emails = redis.queue_keys("emails");
    let ready: Vec<String> = conn.lrange(&emails.ready, 0, -1).await.unwrap();
    assert_eq!(ready.len(), 1, "{ready:?}");
    let payload = Payload::from_json(&ready[0]).unwrap();
    assert_eq!((payload.uuid.to_string(), payload.attempts), (failed, 0));
    let paused: Vec<String> = conn.smembers(redis.keys().paused()).await.unwrap();
    assert_eq!(paused, ["emails"]);
}
on_both_layouts!(the_dashboard_shows_the_counts_and_retries_a_failed_job_with_a_click);
