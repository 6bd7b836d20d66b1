//! Job tags: kept in the payload, and used by `jobsctl failed --tag`, `jobsctl recent --tag`
//! and the dashboard's search to find a job.

use examples::Flaky;
use std::time::Duration;
use tests::dashboard::Dashboard;
use tests::jobs_command::JobsCommand;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, SentVia, TestRedis};

#[tokio::test]
async fn failed_and_recent_jobs_are_found_by_tag_in_the_command_and_the_dashboard() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let tagged = Flaky { fail_times: 1 }
        .dispatch()
        .tries(1)
        .tag("order:7")
        .tag("vip")
        .sent_via(&queue)
        .await;
    Flaky { fail_times: 1 }
        .dispatch()
        .tries(1)
        .tag("order:8")
        .sent_via(&queue)
        .await;
    Flaky { fail_times: 0 }
        .dispatch()
        .tag("order:7")
        .sent_via(&queue)
        .await;
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--stop-when-empty"],
    );
    assert!(worker.wait_exit(Duration::from_secs(30)).await.success());

    let jobs = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let failed = jobs.json(&["failed", "--tag", "order:7"]);
    let failed = failed.as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["record"]["uuid"], tagged.to_string());
    assert_eq!(failed[0]["tags"], serde_json::json!(["order:7", "vip"]));
    assert_eq!(jobs.json(&["failed"]).as_array().unwrap().len(), 2);

    // Workers send their recent attempts about once a second.
    wait_until(
        Duration::from_secs(10),
        "the recent attempts are published",
        || async { jobs.json(&["recent", "default"]).as_array().unwrap().len() == 3 },
    )
    .await;
    let recent = jobs.json(&["recent", "default", "--tag", "order:7"]);
    let outcomes: Vec<&str> = recent
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes.len(), 2, "{recent}");
    assert!(
        outcomes.contains(&"failed") && outcomes.contains(&"done"),
        "{outcomes:?}"
    );

    let dashboard = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);
    let list = dashboard.get_json("/api/failed?tag=vip");
    assert_eq!(list["matched"], 1);
    assert_eq!(list["jobs"][0]["uuid"], tagged.to_string());
    assert_eq!(list["jobs"][0]["tags"][1], "vip");
    let recent = dashboard.get_json("/api/recent?queue=default&tag=order:8");
    assert_eq!(recent.as_array().unwrap().len(), 1);
}
