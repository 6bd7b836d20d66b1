//! Redis failovers under load, against Debian's `redis-server` and `redis-sentinel`: a primary,
//! a replica and three sentinels on loopback ports, two workers and two producers, all through
//! `redis+sentinel://`. The primary is killed with SIGKILL three times; each time the sentinels
//! elect the replica, and the old primary comes back as its replica before the next kill.
//!
//! With durable dispatches and durable acknowledgements, no acknowledged dispatch is lost and
//! no job runs twice; without, the same is counted and reported beside it. Either way the
//! workers take jobs again within down-after-milliseconds + 5 s of each kill, and none exits or
//! hangs. A primary that freezes instead, is replaced, and comes back shows where durability
//! makes the difference: the dispatch it acknowledged without replicas is lost, and the
//! durable one tells its caller.

use examples::Noop;
use redjob::{Durability, Error, QueueConfig};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tests::sentinel::{TestSentinel, DOWN_AFTER};
use tests::wait_for;
use tests::worker_process::WorkerProcess;

/// How long the sentinels may take to elect a new primary, on a busy machine.
const ELECTION: Duration = Duration::from_secs(30);
const KILLS: usize = 3;
/// Steady load between two kills.
const BETWEEN_KILLS: Duration = Duration::from_secs(2);

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// What a run under failovers counted.
#[derive(Debug)]
struct Outcome {
    acknowledged: usize,
    refused: usize,
    lost: usize,
    run_twice: usize,
    /// From each kill until a worker started a job whose dispatch was sent after it.
    recoveries: Vec<Duration>,
}

/// Dispatches acknowledged, each with when it was sent (ms since the epoch).
type Acknowledged = Arc<Mutex<Vec<(String, f64)>>>;

async fn under_failovers(durable: bool) -> Outcome {
    // Two replicas: after a kill one is left to confirm durable writes until the old primary
    // is back.
    let mut deployment = blocking(|| TestSentinel::start(2));
    let url = deployment.url();
    let mut args = vec!["--concurrency", "10"];
    if durable {
        args.extend(["--durable-acks", "1"]);
    }
    let mut workers: Vec<WorkerProcess> = (0..2)
        .map(|_| WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), &url, &args))
        .collect();
    let durability = match durable {
        true => Durability::replicas(1),
        false => Durability::NONE,
    };
    let queue = deployment.queue_with(QueueConfig {
        durability,
        ..QueueConfig::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged: Acknowledged = Arc::default();
    let refused = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, stop) = (queue.clone(), stop.clone());
            let (acknowledged, refused) = (acknowledged.clone(), refused.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let sent_at = epoch_ms();
                    let dispatched = Noop {}.dispatch().via(&queue).await;
                    match dispatched {
                        Ok(uuid) => lock(&acknowledged).push((uuid.to_string(), sent_at)),
                        Err(_) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();

    let mut recoveries = Vec::new();
    for _ in 0..KILLS {
        tokio::time::sleep(BETWEEN_KILLS).await;
        let killed = blocking(|| deployment.kill_primary());
        // Taken once the process is gone: a dispatch sent after it cannot reach it. (It can
        // reach a server the sentinels promoted in an earlier, contested election and have not
        // made a replica again yet: a primary as well, for a while.)
        let killed_ms = epoch_ms();
        let recovered = wait_for(ELECTION, "a job dispatched after the kill starts", || {
            let started: Vec<(String, f64)> = workers
                .iter()
                .flat_map(WorkerProcess::events)
                .filter(|e| e.status == "RUNNING")
                .map(|e| (e.uuid, e.at_ms))
                .collect();
            let after: HashMap<String, f64> = lock(&acknowledged)
                .iter()
                .filter(|(_, at)| *at > killed_ms)
                .cloned()
                .collect();
            let first = started
                .into_iter()
                .filter(|(uuid, _)| after.contains_key(uuid))
                .map(|(_, at)| at)
                .reduce(f64::min);
            async move { first }
        })
        .await;
        recoveries.push(Duration::from_secs_f64(
            (recovered - killed_ms).max(0.0) / 1000.0,
        ));
        blocking(|| {
            deployment.wait_for_new_primary(killed, ELECTION);
            deployment.restart(killed);
            deployment.wait_for_replica(killed, ELECTION);
        });
    }
    tokio::time::sleep(BETWEEN_KILLS).await;
    stop.store(true, Ordering::Relaxed);
    for producer in producers {
        producer.await.unwrap();
    }
    // No worker hangs: after the failovers, jobs dispatched one at a time reach each of them.
    // (A worker whose blocking wait sat on a server the sentinels no longer name rejoins when
    // that wait ends, within its --sleep.)
    let mut last_round = Vec::new();
    let deadline = Instant::now() + ELECTION;
    loop {
        let idle: Vec<usize> = (0..workers.len())
            .filter(|&at| {
                !workers[at]
                    .events()
                    .iter()
                    .any(|e| e.status == "DONE" && last_round.contains(&e.uuid))
            })
            .collect();
        if idle.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "workers {idle:?} ran none of {} jobs dispatched after the failovers",
            last_round.len()
        );
        let sent = Noop {}
            .dispatch()
            .via(&queue)
            .durable(Durability::NONE)
            .await;
        if let Ok(uuid) = sent {
            last_round.push(uuid.to_string());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let acknowledged: Vec<String> = lock(&acknowledged).iter().map(|(u, _)| u.clone()).collect();
    let done = |workers: &[WorkerProcess]| {
        let mut done: HashMap<String, usize> = HashMap::new();
        for event in workers.iter().flat_map(WorkerProcess::events) {
            if event.status == "DONE" {
                *done.entry(event.uuid).or_default() += 1;
            }
        }
        done
    };
    // Every acknowledged job done, or a generous wait for those that are not: they are lost.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let done = done(&workers);
        if acknowledged.iter().all(|uuid| done.contains_key(uuid)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = done(&workers);
    for (at, worker) in workers.iter_mut().enumerate() {
        assert!(worker.is_running(), "worker {at} kept running");
    }
    Outcome {
        acknowledged: acknowledged.len(),
        refused: refused.load(Ordering::Relaxed),
        lost: acknowledged
            .iter()
            .filter(|uuid| !done.contains_key(*uuid))
            .count(),
        run_twice: done.values().filter(|runs| **runs > 1).count(),
        recoveries,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn report(mode: &str, outcome: &Outcome) {
    println!(
        "failover ({mode}): {} kills, {} dispatches acknowledged, {} refused, {} lost, {} run \
         twice, kill to jobs taken again {:?}",
        KILLS,
        outcome.acknowledged,
        outcome.refused,
        outcome.lost,
        outcome.run_twice,
        outcome.recoveries
    );
}

fn assert_recovered(outcome: &Outcome) {
    for recovery in &outcome.recoveries {
        assert!(
            *recovery <= DOWN_AFTER + Duration::from_secs(5),
            "the workers took jobs again {recovery:?} after a kill: {outcome:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_dispatches_and_acknowledgements_lose_nothing_and_run_nothing_twice_over_three_failovers(
) {
    let outcome = under_failovers(true).await;
    report("durable dispatch, durable acks", &outcome);
    assert_eq!(
        outcome.lost, 0,
        "no acknowledged durable dispatch is lost: {outcome:?}"
    );
    assert_eq!(outcome.run_twice, 0, "no job runs twice: {outcome:?}");
    assert!(outcome.acknowledged > 0);
    assert_recovered(&outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_durability_the_same_failovers_are_counted_and_the_workers_recover_alike() {
    let outcome = under_failovers(false).await;
    report("plain", &outcome);
    assert!(outcome.acknowledged > 0);
    assert_recovered(&outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_primary_replaced_and_back_loses_the_plain_dispatch_it_acknowledged_and_the_durable_one_says_so(
) {
    let mut deployment = blocking(|| TestSentinel::start(1));
    // Longer than the freeze: the dispatches wait for the frozen primary instead of failing.
    let queue = deployment.queue_with(QueueConfig {
        command_timeout: Duration::from_secs(60),
        ..QueueConfig::default()
    });
    // The durable lane's connection is made now, before the freeze, as in a running service.
    let warm_up = Durability::replicas(1).within(Duration::from_secs(5));
    Noop {}
        .dispatch()
        .via(&queue)
        .durable(warm_up)
        .await
        .unwrap();
    let durability = Durability::replicas(1).within(Duration::from_millis(500));
    let old = deployment.agreed_primary().unwrap();
    deployment.server_mut(old).freeze();
    let plain = {
        let queue = queue.clone();
        tokio::spawn(async move { Noop {}.dispatch().via(&queue).await })
    };
    let durable = {
        let queue = queue.clone();
        tokio::spawn(async move { Noop {}.dispatch().via(&queue).durable(durability).await })
    };
    let elected = blocking(|| deployment.wait_for_new_primary(old, ELECTION));
    // Back, it runs the pushes that waited in its sockets, and answers them, before the
    // sentinels make it a replica of the new primary and its data gives way.
    deployment.server_mut(old).resume();
    let plain = plain
        .await
        .unwrap()
        .expect("the old primary acknowledges the plain dispatch");
    let durable = durable.await.unwrap();
    let Err(Error::NotDurable(not_durable)) = durable else {
        panic!("the durable dispatch says no replica has it: {durable:?}");
    };
    blocking(|| deployment.wait_for_replica(old, ELECTION));
    let waiting = deployment.waiting_on(elected, "default");
    println!(
        "frozen primary: the plain dispatch {plain} was acknowledged and is {}; the durable one \
         failed: {not_durable}",
        if waiting.iter().any(|p| p.contains(&plain.to_string())) {
            "kept"
        } else {
            "lost"
        }
    );
    assert!(
        !waiting.iter().any(|p| p.contains(&plain.to_string())),
        "the plain dispatch acknowledged by the old primary did not survive the failover"
    );
}
