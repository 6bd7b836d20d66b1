//! Redis Sentinel, against Debian's `redis-server` and `redis-sentinel`: a primary, a replica
//! and three sentinels on loopback ports. The harness itself (the primary killed, a new one
//! elected, the old one back as a replica), then each way a connection learns of a failover:
//! a worker's blocked wait, a pipeline in flight, and a `READONLY` reply from a demoted
//! primary, each leading to the new primary without a stuck or exiting worker.

use examples::Noop;
use redjob::{Durability, QueueConfig};
use std::time::{Duration, Instant};
use tests::dashboard::Dashboard;
use tests::http::scraped;
use tests::jobs_command::JobsCommand;
use tests::sentinel::{connection, role, TestSentinel, DOWN_AFTER};
use tests::worker_process::WorkerProcess;
use tests::{wait_for, SentVia};

/// How long the sentinels may take to elect a new primary, on a busy machine.
const ELECTION: Duration = Duration::from_secs(30);

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn get(port: u16, key: &str) -> Option<String> {
    let mut conn = connection(port).expect("a connection to the server");
    redis::cmd("GET").arg(key).query(&mut conn).unwrap()
}

#[test]
fn the_sentinels_elect_a_replica_when_the_primary_is_killed_and_take_the_old_one_back() {
    let mut deployment = TestSentinel::start(1);
    let first = deployment
        .agreed_primary()
        .expect("the sentinels name a primary");
    assert!(deployment.url().starts_with("redis+sentinel://127.0.0.1:"));
    assert_eq!(deployment.sentinel_ports().len(), 3);

    let killed = deployment.kill_primary();
    assert_eq!(killed, first);
    let second = deployment.wait_for_new_primary(killed, ELECTION);
    assert_ne!(second, first);
    assert_eq!(
        role(second),
        "master",
        "the elected replica is a primary now"
    );

    deployment.restart(killed);
    let deadline = Instant::now() + ELECTION;
    // The sentinels' reconfiguration closes the server's client connections: a new one
    // each time.
    while role(killed) != "slave" {
        assert!(
            Instant::now() < deadline,
            "the old primary did not become a replica; the sentinels name {:?}",
            deployment.agreed_primary()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(deployment.agreed_primary(), Some(second));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_blocked_waiting_for_jobs_follows_a_failover_and_takes_the_next_job() {
    let mut deployment = blocking(|| TestSentinel::start(1));
    let queue = deployment.queue_with(QueueConfig::default());
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        &deployment.url(),
        &["--sleep", "1"],
    );
    let first = Noop {}.dispatch().sent_via(&queue).await.to_string();
    worker
        .wait_for_event(ELECTION, "the first job is done", |e| {
            e.status == "DONE" && e.uuid == first
        })
        .await;

    let killed_at = Instant::now();
    let killed = blocking(|| deployment.kill_primary());
    let elected = blocking(|| deployment.wait_for_new_primary(killed, ELECTION));
    let elected_in = killed_at.elapsed();
    // The dispatcher's handle learns of the failover from its first command's failure.
    let second = wait_for(
        ELECTION,
        "a dispatch through the sentinels succeeds",
        || async {
            Noop {}
                .dispatch()
                .via(&queue)
                .await
                .ok()
                .map(|uuid| uuid.to_string())
        },
    )
    .await;
    worker
        .wait_for_event(ELECTION, "the job after the failover is done", |e| {
            e.status == "DONE" && e.uuid == second
        })
        .await;
    let back_in = killed_at.elapsed();
    assert!(worker.is_running(), "the worker kept running");
    assert_eq!(role(elected), "master");
    println!(
        "blocked wait: new primary elected {elected_in:?} after the kill, the next job done \
         {back_in:?} after it"
    );
    assert!(
        back_in <= elected_in + DOWN_AFTER + Duration::from_secs(5),
        "the worker took the next job {back_in:?} after the kill (elected after {elected_in:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_in_flight_when_the_primary_dies_fails_and_the_next_goes_to_the_new_primary() {
    let mut deployment = blocking(|| TestSentinel::start(1));
    let queue = deployment.queue_with(QueueConfig {
        command_timeout: Duration::from_secs(20),
        ..QueueConfig::default()
    });
    queue
        .query::<()>(redis::cmd("SET").arg("before").arg("1"))
        .await
        .unwrap();
    let old = deployment.agreed_primary().unwrap();
    // A pipeline whose reply the server holds back: WAIT for more replicas than there are.
    let mut in_flight = redis::pipe();
    in_flight.cmd("SET").arg("during").arg("1").ignore();
    in_flight.cmd("WAIT").arg(5).arg(15_000);
    let pending = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.query_pipe::<(u64,)>(&in_flight).await })
    };
    let mut probe = deployment.server(old).client().get_connection().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut probe).unwrap();
        if clients.contains("cmd=wait") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pipeline never reached WAIT: {clients}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = blocking(|| deployment.kill_primary());
    assert_eq!(killed, old);
    let failed = pending.await.unwrap();
    assert!(failed.is_err(), "the pipeline in flight fails: {failed:?}");
    let elected = blocking(|| deployment.wait_for_new_primary(killed, ELECTION));
    wait_until_ok(ELECTION, || async {
        queue
            .query::<()>(redis::cmd("SET").arg("after").arg("1"))
            .await
    })
    .await;
    assert_eq!(
        get(elected, "after").as_deref(),
        Some("1"),
        "written to the new primary"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_by_a_demoted_primary_goes_to_the_new_primary_at_once() {
    let deployment = blocking(|| TestSentinel::start(1));
    let queue = deployment.queue_with(QueueConfig::default());
    queue
        .query::<()>(redis::cmd("SET").arg("before").arg("1"))
        .await
        .unwrap();
    // The durable lane's connection, made before the demotion.
    let durable = Durability::replicas(1).within(Duration::from_secs(2));
    Noop {}
        .dispatch()
        .via(&queue)
        .durable(durable)
        .await
        .unwrap();
    let old = deployment.agreed_primary().unwrap();
    let replica = deployment
        .server_ports()
        .into_iter()
        .find(|port| *port != old)
        .unwrap();
    blocking(|| deployment.demote_primary_by_hand(replica));
    assert_eq!(role(old), "slave");
    // The handle's connection to the old primary is still open: its write meets READONLY,
    // and goes to the primary the sentinels name now, in the same call.
    queue
        .query::<()>(redis::cmd("SET").arg("after").arg("1"))
        .await
        .expect("the write refused as READONLY is sent again to the new primary");
    assert_eq!(get(replica, "after").as_deref(), Some("1"));
    let uuid = Noop {}.dispatch().sent_via(&queue).await;
    assert!(
        deployment
            .waiting_on(replica, "default")
            .iter()
            .any(|payload| payload.contains(&uuid.to_string())),
        "the dispatch went to the new primary"
    );
    // The durable lane learns of the demotion from its refusal, and goes to the new primary
    // (confirmed once the old primary, its replica now, has synced).
    let uuid = wait_until_ok(ELECTION, || async {
        Noop {}.dispatch().via(&queue).durable(durable).await
    })
    .await;
    assert!(
        deployment
            .waiting_on(replica, "default")
            .iter()
            .any(|payload| payload.contains(&uuid.to_string())),
        "the durable dispatch went to the new primary"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_finds_no_primary_says_so_and_keeps_trying() {
    let deployment = blocking(|| TestSentinel::start(0));
    let url = deployment.url().replace("/mymaster", "/nosuchservice");
    let mut worker = WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), &url, &[]);
    wait_for(ELECTION, "the worker says it finds no primary", || async {
        worker
            .lines()
            .into_iter()
            .find(|line| line.contains("no sentinel names a reachable primary"))
    })
    .await;
    assert!(worker.is_running(), "the worker keeps trying");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobsctl_the_dashboard_and_the_metrics_read_the_queues_through_the_sentinels() {
    let deployment = blocking(|| TestSentinel::start(1));
    let url = deployment.url();
    let queue = deployment.queue_with(QueueConfig::default());
    // Delayed an hour: the worker below leaves them where they are.
    for _ in 0..3 {
        Noop {}
            .dispatch()
            .on_queue("held")
            .delay(3600)
            .sent_via(&queue)
            .await;
    }
    let jobsctl = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), &url);
    let sizes = jobsctl.json(&["size", "held"]);
    assert_eq!(sizes[0]["delayed"], 3, "{sizes}");

    let dashboard = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), &url, &[], &[]);
    let queues = dashboard.get_json("/api/queues");
    let held = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "held")
        .unwrap_or_else(|| panic!("no held queue in {queues}"));
    assert_eq!(held["delayed"], 3, "{queues}");

    let addr = format!("127.0.0.1:{}", tests::free_port());
    let _worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        &url,
        &["--queue", "default,held", "--metrics-addr", &addr],
    );
    let series = r#"jobs_queue_jobs{queue="held",section="delayed"}"#;
    wait_for(ELECTION, "the metrics count the held queue's jobs", || {
        let value = scraped(&addr, series);
        async move { value.filter(|v| *v == 3.0) }
    })
    .await;
}

async fn wait_until_ok<T, E: std::fmt::Debug, F, Fut>(timeout: Duration, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match call().await {
            Ok(value) => return value,
            Err(err) => assert!(Instant::now() < deadline, "still failing: {err:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
