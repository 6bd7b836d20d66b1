//! Durable writes against a real primary and replica (and a Redis Cluster with a replica per
//! primary): a durable dispatch returns once the replica has the job, one `WAIT` covers a
//! bulk, a dispatch that fewer replicas confirm fails with `NotDurable` naming its jobs (which
//! were pushed), a handle's default applies unless a dispatch says otherwise, and a worker's
//! durable acknowledgements wait for the replica and warn when it does not confirm.

use examples::Noop;
use redis::AsyncCommands;
use redjob::{Bulk, Durability, Error, QueueConfig};
use std::time::{Duration, Instant};
use tests::cluster::TestCluster;
use tests::worker_process::WorkerProcess;
use tests::{wait_for, wait_until, TestRedis};

const LONG: Duration = Duration::from_secs(30);

fn primary_with_replica() -> (TestRedis, TestRedis) {
    tokio::task::block_in_place(TestRedis::start_replicated)
}

/// How many `WAIT`s the server has run since its stats were reset.
async fn waits(server: &TestRedis) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

async fn waiting_on(server: &TestRedis, queue: &str) -> Vec<String> {
    server
        .conn()
        .await
        .lrange(format!("queues:{queue}"), 0, -1)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_dispatch_returns_once_the_replica_has_the_job() {
    let (primary, replica) = primary_with_replica();
    let queue = primary.queue();
    let uuid = Noop {}
        .dispatch()
        .via(&queue)
        .durable(Durability::replicas(1))
        .await
        .unwrap();
    // Read from the replica at once: the WAIT answered only once it had the push.
    let on_replica = waiting_on(&replica, "default").await;
    assert!(
        on_replica.iter().any(|p| p.contains(&uuid.to_string())),
        "the replica has the job when the dispatch returns"
    );
    assert_eq!(waits(&primary).await, 1);

    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(&mut primary.conn().await)
        .await
        .unwrap();
    let mut bulk = Bulk::via(&queue).durable(Durability::replicas(1));
    for _ in 0..100 {
        bulk.add(Noop {}.dispatch()).unwrap();
    }
    assert_eq!(bulk.send().await.unwrap().len(), 100);
    assert_eq!(waits(&primary).await, 1, "one WAIT covers the whole bulk");
    assert_eq!(waiting_on(&replica, "default").await.len(), 101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_fewer_replicas_confirm_fails_with_not_durable_naming_its_pushed_jobs() {
    let (primary, mut replica) = primary_with_replica();
    let queue = primary.queue();
    let asked = Durability::replicas(2).within(Duration::from_millis(300));
    let started = Instant::now();
    let err = Noop {}
        .dispatch()
        .via(&queue)
        .durable(asked)
        .await
        .unwrap_err();
    let Error::NotDurable(not_durable) = err else {
        panic!("a typed NotDurable error, not {err:?}");
    };
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the replicas were waited for"
    );
    assert_eq!(not_durable.wanted, 2);
    assert_eq!(not_durable.confirmed, Some(1));
    assert_eq!(not_durable.jobs.len(), 1);
    assert!(
        not_durable
            .to_string()
            .contains("may or may not survive a failover"),
        "{not_durable}"
    );
    let waiting = waiting_on(&primary, "default").await;
    assert!(
        waiting[0].contains(&not_durable.jobs[0].to_string()),
        "the job was pushed all the same"
    );

    replica.kill();
    let mut bulk =
        Bulk::via(&queue).durable(Durability::replicas(1).within(Duration::from_millis(200)));
    bulk.add(Noop {}.dispatch()).unwrap();
    bulk.add(Noop {}.dispatch()).unwrap();
    let Err(Error::NotDurable(not_durable)) = bulk.send().await else {
        panic!("a bulk without its replica is not durable");
    };
    assert_eq!(not_durable.confirmed, Some(0));
    assert_eq!(not_durable.jobs.len(), 2, "every job of the bulk is named");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handles_default_durability_applies_unless_a_dispatch_sets_its_own() {
    let (primary, _replica) = primary_with_replica();
    let queue = primary.queue_with(QueueConfig {
        durability: Durability::replicas(2).within(Duration::from_millis(100)),
        ..primary.config()
    });
    let err = Noop {}.dispatch().via(&queue).await.unwrap_err();
    assert!(matches!(err, Error::NotDurable(_)), "{err:?}");
    Noop {}
        .dispatch()
        .via(&queue)
        .durable(Durability::replicas(1))
        .await
        .unwrap();
    let before = waits(&primary).await;
    Noop {}
        .dispatch()
        .via(&queue)
        .durable(Durability::NONE)
        .await
        .unwrap();
    assert_eq!(
        waits(&primary).await,
        before,
        "a dispatch given NONE sends no WAIT"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_durable_acks_waits_for_the_replica_once_per_batch_and_warns_without_it() {
    let (primary, mut replica) = primary_with_replica();
    let queue = primary.queue();
    let mut bulk = Bulk::via(&queue);
    for _ in 0..500 {
        bulk.add(Noop {}.dispatch()).unwrap();
    }
    bulk.send().await.unwrap();
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        primary.url(),
        &["--durable-acks", "1", "--concurrency", "20"],
    );
    wait_until(LONG, "every job is done and acknowledged", || async {
        let size = queue.size("default").await.unwrap();
        size.total() == 0
    })
    .await;
    let waits_for_acks = waits(&primary).await;
    println!("durable acks: {waits_for_acks} WAITs for 500 jobs");
    assert!(
        (1..500).contains(&waits_for_acks),
        "acknowledgements wait in batches, not per job: {waits_for_acks}"
    );
    assert!(worker.lines().iter().all(|l| !l.contains("not durable")));

    replica.kill();
    let uuid = Noop {}.dispatch().via(&queue).await.unwrap().to_string();
    wait_for(
        LONG,
        "the worker warns that the acknowledgement is not durable",
        || async {
            worker
                .lines()
                .into_iter()
                .find(|line| line.contains("not durable"))
        },
    )
    .await;
    worker
        .wait_for_event(LONG, "the job is done", |e| {
            e.status == "DONE" && e.uuid == uuid
        })
        .await;
    wait_until(LONG, "the job is acknowledged all the same", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;
    assert!(worker.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_durable_write_needs_the_replicas_of_every_shard() {
    let mut cluster = tokio::task::block_in_place(|| TestCluster::start_with_replicas(1));
    let queue = cluster.queue();
    let mut bulk = Bulk::via(&queue).durable(Durability::replicas(1));
    // Queues whose keys hash to different slots, on different primaries.
    for name in ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"] {
        bulk.add(Noop {}.dispatch().on_queue(name)).unwrap();
    }
    assert_eq!(bulk.send().await.unwrap().len(), 6);

    let replica = cluster.replica_ports()[0];
    cluster.kill_node(replica);
    let err = Noop {}
        .dispatch()
        .via(&queue)
        .durable(Durability::replicas(1).within(Duration::from_millis(200)))
        .await
        .unwrap_err();
    let Error::NotDurable(not_durable) = err else {
        panic!("a shard without its replica makes the write not durable: {err:?}");
    };
    assert_eq!(not_durable.confirmed, Some(0));
}
