//! `jobsctl dashboard` against a real redis-server and the real worker: its JSON endpoints, basic
//! auth, the refusal of cross-site and foreign-host requests, and changes (retry, forget,
//! pause) made through its POST endpoints, checked in Redis. Each test that talks to Redis runs
//! on one server and on a Redis Cluster (`<test>::one_server`, `<test>::cluster`).

use examples::{Flaky, Noop, Panic};
use redis::AsyncCommands;
use redjob::Payload;
use std::time::Duration;
use tests::dashboard::Dashboard;
use tests::http::Request;
use tests::worker_process::WorkerProcess;
use tests::{on_both_layouts, wait_for, SentVia, Server, TestRedis, TrackedVia};

const LONG: Duration = Duration::from_secs(30);

fn dashboard(redis: &Server, args: &[&str], envs: &[(&str, &str)]) -> Dashboard {
    Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), args, envs)
}

fn start_worker(redis: &Server, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis.url(), args)
}

/// Runs a worker on `queues` until they are empty.
async fn drain(redis: &Server, queues: &str) {
    let mut worker = start_worker(redis, &["--queue", queues, "--stop-when-empty"]);
    assert!(worker.wait_exit(LONG).await.success());
}

async fn failed_count(redis: &Server) -> u64 {
    let mut conn = redis.conn().await;
    conn.hlen(redis.keys().failed_jobs()).await.unwrap()
}

async fn json_endpoints_show_throughput_queues_failed_jobs_workers_and_recent_jobs(redis: Server) {
    let queue = redis.queue();
    for _ in 0..3 {
        Noop {}.dispatch().on_queue("emails").sent_via(&queue).await;
    }
    let failed = Panic {}
        .dispatch()
        .on_queue("emails")
        .sent_via(&queue)
        .await
        .to_string();
    Noop {}
        .dispatch()
        .on_queue("emails")
        .delay(600)
        .sent_via(&queue)
        .await;
    let _worker = start_worker(&redis, &["--queue", "emails", "--name", "mailer"]);
    let dash = dashboard(&redis, &[], &[]);

    let overview = wait_for(LONG, "the overview counts the 4 attempts", || {
        let overview = dash.get_json("/api/overview");
        let done = overview["processed_last_hour"] == 4 && overview["workers"] == 1;
        async move { done.then_some(overview) }
    })
    .await;
    assert_eq!(overview["failed_last_hour"], 1);
    assert_eq!(overview["failed_jobs"], 1);
    assert_eq!(overview["concurrency"], 10);
    let minutes = overview["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 60);
    let charted: u64 = minutes
        .iter()
        .map(|m| m["processed"].as_u64().unwrap())
        .sum();
    assert_eq!(charted, 4);

    let queues = dash.get_json("/api/queues");
    let emails = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "emails")
        .unwrap_or_else(|| panic!("no emails queue in {queues}"));
    assert_eq!(emails["ready"], 0);
    assert_eq!(emails["delayed"], 1);
    assert_eq!(emails["reserved"], 0);
    assert_eq!(emails["paused"], false);
    assert_eq!(emails["estimated_wait_secs"], 0.0);
    assert!(emails["per_minute"].as_f64().unwrap() > 0.0, "{emails}");

    let list = dash.get_json("/api/failed");
    assert_eq!(
        (list["total"].as_u64(), list["matched"].as_u64()),
        (Some(1), Some(1))
    );
    let row = &list["jobs"][0];
    assert_eq!(row["uuid"], failed.as_str());
    assert_eq!(
        (row["job"].as_str(), row["queue"].as_str()),
        (Some("panic"), Some("emails"))
    );
    assert!(row["exception"]
        .as_str()
        .unwrap()
        .contains("panicking on purpose"));
    for (search, matched) in [
        ("job=panic", 1),
        ("job=noop", 0),
        ("queue=emails", 1),
        ("queue=other", 0),
        ("text=PANICKING", 1),
        ("text=nothing+like+it", 0),
        ("job=panic&queue=emails&text=purpose", 1),
    ] {
        let list = dash.get_json(&format!("/api/failed?{search}"));
        assert_eq!(list["matched"], matched, "{search}: {list}");
        assert_eq!(list["total"], 1);
    }

    let detail = dash.get_json(&format!("/api/failed/{failed}"));
    let payload = Payload::from_json(detail["record"]["payload"].as_str().unwrap()).unwrap();
    assert_eq!(payload.uuid.to_string(), failed);
    assert!(detail["record"]["exception"]
        .as_str()
        .unwrap()
        .contains("panicking on purpose"));
    let unknown = dash.send(Request::get("/api/failed/no-such-uuid"));
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"]
        .as_str()
        .unwrap()
        .contains("no-such-uuid"));

    let workers = dash.get_json("/api/workers");
    assert_eq!(workers.as_array().unwrap().len(), 1);
    assert_eq!(workers[0]["name"], "mailer");
    assert_eq!(workers[0]["queues"], serde_json::json!(["emails"]));
    assert_eq!(workers[0]["processed"], 4);

    let recent = dash.get_json("/api/recent?queue=emails");
    let recent = recent.as_array().unwrap();
    assert_eq!(recent.len(), 4, "{recent:?}");
    // Ten jobs run at once, so the order they finished in is not the order they were pushed.
    let failures: Vec<_> = recent.iter().filter(|j| j["outcome"] == "failed").collect();
    assert_eq!(failures.len(), 1, "{recent:?}");
    assert_eq!(failures[0]["uuid"], failed.as_str());
    assert_eq!(failures[0]["job"], "panic");
    assert_eq!(recent.iter().filter(|j| j["outcome"] == "done").count(), 3);
    assert_eq!(
        dash.get_json("/api/recent?queue=emails&limit=2")
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let page = dash.send(Request::get("/"));
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<script src=\"app.js\""));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let script = dash.send(Request::get("/app.js"));
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(script.body.contains("X-Requested-With"));
}
on_both_layouts!(json_endpoints_show_throughput_queues_failed_jobs_workers_and_recent_jobs);

async fn basic_auth_guards_every_page_when_configured(redis: Server) {
    let dash = dashboard(
        &redis,
        &[],
        &[(redjob_worker::ops::dashboard::AUTH_ENV, "admin:s3cret")],
    );
    let good = "Basic YWRtaW46czNjcmV0"; // admin:s3cret
    let wrong = "Basic YWRtaW46d3Jvbmc="; // admin:wrong
    for path in ["/", "/app.js", "/api/overview", "/api/failed"] {
        let anonymous = dash.send(Request::get(path));
        assert_eq!(anonymous.status, 401, "{path}");
        assert!(anonymous
            .header("www-authenticate")
            .is_some_and(|h| h.starts_with("Basic realm=")));
        let refused = dash.send(Request::get(path).header("Authorization", wrong));
        assert_eq!(refused.status, 401, "{path}");
        let allowed = dash.send(Request::get(path).header("Authorization", good));
        assert_eq!(allowed.status, 200, "{path}: {}", allowed.body);
    }
    // A change without credentials is refused before anything happens.
    let pause = dash.send(dash.page_post("/api/queues/emails/pause", "{}"));
    assert_eq!(pause.status, 401);
    let mut conn = redis.conn().await;
    let paused: bool = conn
        .sismember(redis.keys().paused(), "emails")
        .await
        .unwrap();
    assert!(!paused);
    let pause = dash.send(
        dash.page_post("/api/queues/emails/pause", "{}")
            .header("Authorization", good),
    );
    assert_eq!(pause.status, 200, "{}", pause.body);
    let paused: bool = conn
        .sismember(redis.keys().paused(), "emails")
        .await
        .unwrap();
    assert!(paused);
}
on_both_layouts!(basic_auth_guards_every_page_when_configured);

async fn cross_site_requests_are_refused_and_a_page_post_retries_the_job(redis: Server) {
    let queue = redis.queue();
    let failed = Panic {}.dispatch().sent_via(&queue).await.to_string();
    drain(&redis, "default").await;
    assert_eq!(failed_count(&redis).await, 1);
    let dash = dashboard(&redis, &[], &[]);
    let path = format!("/api/failed/{failed}/retry");

    // What a form on another site submits: no custom header, a foreign Origin.
    let form = dash.send(
        Request::post(&path)
            .header("Origin", "http://evil.example")
            .header("Sec-Fetch-Site", "cross-site")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("x=1"),
    );
    assert_eq!(form.status, 403, "{}", form.body);
    // The custom header alone is not enough from another origin or site.
    let foreign_origin = dash.send(
        Request::post(&path)
            .header("X-Requested-With", "jobs-dashboard")
            .header("Origin", "http://evil.example"),
    );
    assert_eq!(foreign_origin.status, 403);
    let foreign_site = dash.send(
        Request::post(&path)
            .header("X-Requested-With", "jobs-dashboard")
            .header("Sec-Fetch-Site", "cross-site"),
    );
    assert_eq!(foreign_site.status, 403);
    // A same-origin POST without the header (a form on the dashboard's own origin).
    let no_header = dash.send(Request::post(&path).header("Origin", dash.url()));
    assert_eq!(no_header.status, 403);
    // A page of another site whose name resolves to 127.0.0.1 (DNS rebinding).
    let rebound = dash.send(Request::get("/api/failed").header("Host", "evil.example:9900"));
    assert_eq!(rebound.status, 403);
    // GET never changes anything.
    assert_eq!(dash.send(Request::get(&path)).status, 405);

    assert_eq!(failed_count(&redis).await, 1, "nothing was retried");
    let keys = redis.queue_keys("default");
    let mut conn = redis.conn().await;
    let ready: u64 = conn.llen(&keys.ready).await.unwrap();
    assert_eq!(ready, 0);

    let retried = dash.send(dash.page_post(&path, ""));
    assert_eq!(retried.status, 200, "{}", retried.body);
    assert_eq!(retried.json()["retried"][0]["uuid"], failed.as_str());
    assert_eq!(failed_count(&redis).await, 0);
    let pushed: Vec<String> = conn.lrange(&keys.ready, 0, -1).await.unwrap();
    assert_eq!(pushed.len(), 1);
    let payload = Payload::from_json(&pushed[0]).unwrap();
    assert_eq!(
        (payload.uuid.to_string(), payload.attempts),
        (failed.clone(), 0)
    );
    let tokens: u64 = conn.llen(&keys.notify).await.unwrap();
    assert_eq!(tokens, 1);
    let again = dash.send(dash.page_post(&path, ""));
    assert_eq!(again.status, 404);
}
on_both_layouts!(cross_site_requests_are_refused_and_a_page_post_retries_the_job);

async fn retry_forget_pause_and_resume_through_the_page_endpoints(redis: Server) {
    let queue = redis.queue();
    let mut q1 = Vec::new();
    for _ in 0..2 {
        q1.push(Panic {}.dispatch().on_queue("q1").sent_via(&queue).await);
    }
    let flaky = Flaky { fail_times: 5 }
        .dispatch()
        .on_queue("q2")
        .sent_via(&queue)
        .await
        .to_string();
    let forgotten = Panic {}
        .dispatch()
        .on_queue("q2")
        .sent_via(&queue)
        .await
        .to_string();
    drain(&redis, "q1,q2").await;
    assert_eq!(failed_count(&redis).await, 4);
    let dash = dashboard(&redis, &[], &[]);
    let mut conn = redis.conn().await;

    let forget = dash.send(dash.page_post(&format!("/api/failed/{forgotten}/forget"), ""));
    assert_eq!(forget.status, 200, "{}", forget.body);
    assert_eq!(failed_count(&redis).await, 3);

    let retry = dash.send(dash.page_post("/api/failed/retry", r#"{"queue":"q1","text":""}"#));
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.json()["retried"].as_array().unwrap().len(), 2);
    let pushed: Vec<String> = conn
        .lrange(&redis.queue_keys("q1").ready, 0, -1)
        .await
        .unwrap();
    let mut uuids: Vec<String> = pushed
        .iter()
        .map(|p| Payload::from_json(p).unwrap().uuid.to_string())
        .collect();
    let mut expected: Vec<String> = q1.iter().map(|u| u.to_string()).collect();
    uuids.sort();
    expected.sort();
    assert_eq!(uuids, expected);

    let forget = dash.send(dash.page_post("/api/failed/forget", r#"{"text":"FLAKY JOB"}"#));
    assert_eq!(forget.status, 200, "{}", forget.body);
    assert_eq!(forget.json()["forgotten"], 1);
    assert_eq!(failed_count(&redis).await, 0);
    let gone: Option<String> = conn.hget(redis.keys().failed_jobs(), &flaky).await.unwrap();
    assert_eq!(gone, None);

    let pause = dash.send(dash.page_post("/api/queues/q1/pause", ""));
    assert_eq!(pause.json()["changed"], true);
    let paused: Vec<String> = conn.smembers(redis.keys().paused()).await.unwrap();
    assert_eq!(paused, ["q1"]);
    let q1_row = dash.get_json("/api/queues");
    let q1_row = q1_row
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "q1")
        .unwrap();
    assert_eq!(
        (q1_row["paused"].as_bool(), q1_row["ready"].as_u64()),
        (Some(true), Some(2))
    );
    assert_eq!(q1_row["estimated_wait_secs"], serde_json::Value::Null);
    let resume = dash.send(dash.page_post("/api/queues/q1/resume", ""));
    assert_eq!(resume.json()["changed"], true);
    let paused: Vec<String> = conn.smembers(redis.keys().paused()).await.unwrap();
    assert!(paused.is_empty());
}
on_both_layouts!(retry_forget_pause_and_resume_through_the_page_endpoints);

// Refused before Redis is used (the connection is made on first use): one server is enough.
#[tokio::test]
async fn bad_credentials_and_a_taken_address_are_clear_errors() {
    let redis = TestRedis::start();
    let jobs = tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let ran = jobs.run(&["dashboard", "--listen", "127.0.0.1:0", "--auth", "admin"]);
    assert_eq!(ran.code(), Some(1));
    assert!(
        ran.stderr.contains("--auth must be user:password"),
        "{}",
        ran.stderr
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let ran = jobs.run(&["dashboard", "--listen", &addr]);
    assert_eq!(ran.code(), Some(1));
    assert!(
        ran.stderr.contains(&format!("cannot listen on {addr}")),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn listening_beyond_loopback_needs_auth_or_the_flag_that_names_the_risk() {
    let redis = TestRedis::start();
    let jobs = tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let addr = format!("0.0.0.0:{}", tests::free_port());
    let ran = jobs.run(&["dashboard", "--listen", &addr]);
    assert_eq!(ran.code(), Some(1), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("--insecure-without-auth") && ran.stderr.contains("--auth"),
        "the refusal names the flags: {}",
        ran.stderr
    );
    let program = env!("CARGO_BIN_EXE_test_jobs");
    let open = Dashboard::start_on(
        "0.0.0.0",
        program,
        redis.url(),
        &["--insecure-without-auth"],
        &[],
    );
    assert_eq!(open.send(Request::get("/api/queues")).status, 200);
    let guarded = Dashboard::start_on(
        "0.0.0.0",
        program,
        redis.url(),
        &["--auth", "ops:secret"],
        &[],
    );
    assert_eq!(guarded.send(Request::get("/api/queues")).status, 401);
}

#[tokio::test]
async fn read_only_credentials_read_every_page_and_change_nothing() {
    let redis = TestRedis::start();
    let dash = Dashboard::start(
        env!("CARGO_BIN_EXE_test_jobs"),
        redis.url(),
        &["--auth", "ops:secret", "--read-only-auth", "viewer:look"],
        &[],
    );
    let full = "Basic b3BzOnNlY3JldA=="; // ops:secret
    let viewer = "Basic dmlld2VyOmxvb2s="; // viewer:look
    let wrong = "Basic dmlld2VyOndyb25n"; // viewer:wrong
    assert_eq!(dash.send(Request::get("/api/queues")).status, 401);
    let refused = dash.send(Request::get("/api/queues").header("Authorization", wrong));
    assert_eq!(refused.status, 401);
    for path in ["/", "/api/queues", "/api/overview", "/api/failed"] {
        let read = dash.send(Request::get(path).header("Authorization", viewer));
        assert_eq!(read.status, 200, "{path}: {}", read.body);
    }
    let pause = |authorization| {
        dash.send(
            dash.page_post("/api/queues/emails/pause", "{}")
                .header("Authorization", authorization),
        )
    };
    let paused = || async {
        let paused: bool = redis
            .conn()
            .await
            .sismember(redis.queue().keys().paused(), "emails")
            .await
            .unwrap();
        paused
    };
    let refused = pause(viewer);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("read-only"), "{}", refused.body);
    assert!(!paused().await, "a read-only request changed nothing");
    assert_eq!(pause(full).status, 200);
    assert!(paused().await);

    let jobs = tests::jobs_command::JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let ran = jobs.run(&[
        "dashboard",
        "--listen",
        "127.0.0.1:0",
        "--read-only-auth",
        "viewer",
    ]);
    assert_eq!(ran.code(), Some(1));
    assert!(
        ran.stderr
            .contains("--read-only-auth must be user:password"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn an_unreachable_redis_is_a_json_error_the_page_can_show() {
    let port = tests::CLOSED_PORT;
    let dash = Dashboard::start(
        env!("CARGO_BIN_EXE_test_jobs"),
        &format!("redis://127.0.0.1:{port}"),
        &[],
        &[],
    );
    for path in [
        "/api/overview",
        "/api/queues",
        "/api/failed",
        "/api/workers",
    ] {
        let response = dash.send(Request::get(path));
        assert_eq!(response.status, 503, "{path}");
        assert!(
            response.json()["error"].is_string(),
            "{path}: {}",
            response.body
        );
    }
    assert_eq!(dash.send(Request::get("/")).status, 200);
}

async fn batches_are_listed_with_their_progress_and_failed_jobs_and_can_be_cancelled(
    redis: Server,
) {
    use examples::Step;
    use redjob::workflow::Batch;
    let queue = redis.queue();
    let failing = Step {
        label: "bad".into(),
        fail: true,
        ..Step::default()
    };
    let finished = Batch::new()
        .name("imports")
        .job(failing.dispatch())
        .jobs((0..3).map(|n| Step::new(format!("ok{n}")).dispatch()))
        .allow_failures()
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    drain(&redis, "default").await;
    let waiting = Batch::new()
        .name("waiting")
        .job(Step::new("later").dispatch().on_queue("idle"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    let dash = dashboard(&redis, &[], &[]);
    let batches = dash.get_json("/api/batches");
    let batches = batches.as_array().unwrap();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0]["id"], waiting.to_string());
    let done = &batches[1];
    assert_eq!(done["id"], finished.to_string());
    assert_eq!(
        (
            done["total"].as_u64(),
            done["pending"].as_u64(),
            done["failed"].as_u64()
        ),
        (Some(4), Some(0), Some(1))
    );
    assert_eq!(done["failed_jobs"].as_array().unwrap().len(), 1);
    assert!(done["finished_at"].is_string());

    let cancel = dash.send(dash.page_post(&format!("/api/batches/{waiting}/cancel"), "{}"));
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    assert_eq!(cancel.json()["cancelled"], true);
    assert!(queue.batch(waiting).await.unwrap().unwrap().cancelled());
    let missing = dash.send(dash.page_post("/api/batches/nope/cancel", "{}"));
    assert_eq!(missing.status, 404);
}
on_both_layouts!(batches_are_listed_with_their_progress_and_failed_jobs_and_can_be_cancelled);

async fn running_jobs_are_listed_with_their_progress_and_can_be_cancelled(redis: Server) {
    let queue = redis.queue();
    let job = examples::Countdown {
        steps: 600,
        step_ms: 100,
        mode: "stop".into(),
    }
    .dispatch()
    .on_queue("long")
    .tracked_via(&queue)
    .await;
    let _worker = start_worker(&redis, &["--queue", "long", "--name", "runner"]);
    let dash = dashboard(&redis, &[], &[]);
    let listed = wait_for(LONG, "the job is listed with its progress", || {
        let running = dash.get_json("/api/running");
        let found = running.as_array().and_then(|jobs| {
            jobs.iter()
                .find(|j| j["uuid"] == job.to_string() && j["progress"].as_u64() >= Some(1))
                .cloned()
        });
        async move { found }
    })
    .await;
    assert_eq!(listed["job"], "countdown");
    assert_eq!(listed["queue"], "long");
    assert_eq!(listed["tracked"], true);
    assert!(listed["worker"].as_str().unwrap().starts_with("runner@"));
    let page = dash.send(Request::get("/"));
    assert!(page.body.contains("Running jobs"));

    let cancel = dash.send(dash.page_post(&format!("/api/jobs/{}/cancel", *job), "{}"));
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    assert_eq!(cancel.json()["found"], "running");
    let ended = job.wait(LONG).await;
    assert!(
        matches!(ended, Err(redjob::status::WaitError::Cancelled)),
        "{ended:?}"
    );
    let status = dash.get_json(&format!("/api/jobs/{}", *job));
    assert_eq!(status["state"], "cancelled");
}
on_both_layouts!(running_jobs_are_listed_with_their_progress_and_can_be_cancelled);

async fn schedules_are_listed_with_their_next_tick(redis: Server) {
    let worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--schedule", "--queue", "other"],
        &[("TEST_SCHEDULE", "nightly:0 0 3 * * *:last")],
    );
    worker.wait_started().await;
    let dash = dashboard(&redis, &[], &[]);
    let listed = wait_for(LONG, "the schedule is listed", || {
        let listed = dash.get_json("/api/schedules");
        async move { listed.as_array().filter(|l| !l.is_empty()).cloned() }
    })
    .await;
    assert_eq!(listed[0]["name"], "nightly");
    assert_eq!(listed[0]["stale"], false);
    assert!(
        listed[0]["next_tick"]
            .as_str()
            .unwrap()
            .ends_with("T03:00:00Z"),
        "{listed:?}"
    );
}
on_both_layouts!(schedules_are_listed_with_their_next_tick);
