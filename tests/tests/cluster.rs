//! The queue flow on a real Redis Cluster of three primaries: hash-tagged keys spread over the
//! nodes, many jobs run exactly once by two worker processes, strict priority across slots, and
//! releases, delays and failures each within their slots; a Laravel key prefix, outside
//! the hash tags; rate limits, funnels, overlap locks and unique locks across slots; chains
//! and batches whose steps and jobs are in different slots; and `jobsctl retry`, whose two steps
//! (push onto the queue, remove the failed-job record) are in different slots.

use examples::{Flaky, Guarded, Noop, Panic, RebuildIndex};
use redis::AsyncCommands;
use redjob::queue::keys::KeyLayout;
use redjob::{Bulk, FailedJob, QueueConfig};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};
use tests::cluster::TestCluster;
use tests::protocol::WorkerCalls;
use tests::worker_process::{JobEvent, WorkerProcess};
use tests::SentVia;
use tests::{sent_in_bulk, wait_for_empty_queue, wait_until};

/// Three queues whose slots fall on three different nodes, highest priority first.
const QUEUES: [&str; 3] = ["high", "normal", "low"];

fn start_worker(cluster: &TestCluster, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), cluster.url(), args)
}

/// How many `earlier` jobs started after the first `later` job started.
fn started_after_first(events: &[JobEvent], earlier: &str, later: &str) -> usize {
    fn running<'a>(events: &'a [JobEvent], queue: &'a str) -> impl Iterator<Item = &'a JobEvent> {
        events
            .iter()
            .filter(move |e| e.status == "RUNNING" && e.queue == queue)
    }
    let Some(first_later) = running(events, later).map(|e| e.at_ms).reduce(f64::min) else {
        return 0;
    };
    running(events, earlier)
        .filter(|e| e.at_ms > first_later)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_jobs_over_three_queues_run_exactly_once_with_two_workers() {
    const JOBS: usize = 20_000;
    const WORKERS: usize = 2;
    const CONCURRENCY: usize = 10;
    let cluster = TestCluster::start();
    let queue = cluster.queue();

    let dispatch_started = Instant::now();
    let jobs = (0..JOBS).map(|i| Noop {}.dispatch().on_queue(QUEUES[i % QUEUES.len()]));
    let dispatched = sent_in_bulk(&queue, jobs).await;
    let dispatch_time = dispatch_started.elapsed();

    // Every key of a queue is hash-tagged and lives on one node; the three queues on three.
    let keys = cluster.keys_by_node().await;
    let mut expected: Vec<String> = QUEUES
        .iter()
        .flat_map(|q| [format!("queues:{{{q}}}"), format!("queues:{{{q}}}:notify")])
        .collect();
    expected.sort();
    let mut found: Vec<String> = keys.iter().map(|(_, key)| key.clone()).collect();
    found.sort();
    assert_eq!(found, expected, "keys after dispatch: {keys:?}");
    let mut nodes_of_queue = HashMap::new();
    for (port, key) in &keys {
        let tag = key.split(['{', '}']).nth(1).unwrap().to_owned();
        nodes_of_queue
            .entry(tag)
            .or_insert_with(BTreeSet::new)
            .insert(*port);
    }
    assert!(nodes_of_queue.values().all(|ports| ports.len() == 1));
    let ports: BTreeSet<u16> = nodes_of_queue.values().flatten().copied().collect();
    assert_eq!(ports.len(), 3, "queues on nodes {nodes_of_queue:?}");
    for q in QUEUES {
        assert_eq!(
            queue.size(q).await.unwrap().ready,
            (JOBS / 3 + usize::from(QUEUES.iter().position(|x| *x == q).unwrap() < JOBS % 3))
                as u64
        );
    }

    let run_started = Instant::now();
    let concurrency = CONCURRENCY.to_string();
    let args = [
        "--queue",
        "high,normal,low",
        "--concurrency",
        &concurrency,
        "--retry-after",
        "60",
        "--timeout",
        "30",
        "--stop-when-empty",
    ];
    let mut workers: Vec<WorkerProcess> = (0..WORKERS)
        .map(|_| start_worker(&cluster, &args))
        .collect();
    for worker in &mut workers {
        let status = worker.wait_exit(Duration::from_secs(45)).await;
        assert!(status.success(), "a worker exited with {status}");
    }
    let run_time = run_started.elapsed();

    let per_worker: Vec<Vec<JobEvent>> = workers.iter().map(|w| w.events()).collect();
    let mut runs: HashMap<&str, usize> = HashMap::new();
    let mut done = 0;
    for event in per_worker.iter().flatten() {
        match event.status.as_str() {
            "RUNNING" => *runs.entry(event.uuid.as_str()).or_default() += 1,
            "DONE" => done += 1,
            other => panic!("unexpected job event {other}: {event:?}"),
        }
    }
    let lost = dispatched
        .iter()
        .filter(|uuid| !runs.contains_key(uuid.as_str()))
        .count();
    let duplicates = runs.values().filter(|n| **n > 1).count();
    let by_worker: Vec<usize> = per_worker
        .iter()
        .map(|events| events.iter().filter(|e| e.status == "DONE").count())
        .collect();
    let overtaken = started_after_first(&per_worker.concat(), "high", "normal")
        + started_after_first(&per_worker.concat(), "normal", "low");
    println!(
        "cluster: {JOBS} jobs over {} queues on 3 primaries, {WORKERS} workers x {CONCURRENCY} \
         slots: dispatched in {:.2} s, run in {:.2} s ({:.0} jobs/s); done per worker \
         {by_worker:?}; ran twice {duplicates}; lost {lost}; higher-queue jobs started after \
         a lower queue's first {overtaken}",
        QUEUES.len(),
        dispatch_time.as_secs_f64(),
        run_time.as_secs_f64(),
        JOBS as f64 / run_time.as_secs_f64(),
    );
    assert_eq!(lost, 0);
    assert_eq!(duplicates, 0);
    assert_eq!(runs.len(), JOBS);
    assert_eq!(done, JOBS);
    assert!(
        by_worker.iter().all(|n| *n > 0),
        "done per worker {by_worker:?}"
    );
    // Only jobs already reserved when the higher queue ran dry can start after a lower queue's
    // first job: at most one batch of free slots per worker.
    assert!(
        overtaken <= 2 * WORKERS * CONCURRENCY,
        "{overtaken} higher-queue jobs started after a lower queue's first"
    );
    for q in QUEUES {
        assert_eq!(queue.size(q).await.unwrap().total(), 0, "queue {q}");
    }
    assert_eq!(queue.failed_jobs(10).await.unwrap().len(), 0);
    assert_eq!(cluster.keys_by_node().await, Vec::<(u16, String)>::new());
}

#[tokio::test]
async fn a_worker_takes_queues_on_different_nodes_in_strict_priority_order() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    for q in QUEUES.iter().rev() {
        for _ in 0..5 {
            Noop {}.dispatch().on_queue(*q).sent_via(&queue).await;
        }
    }
    let args = [
        "--queue",
        "high,normal,low",
        "--concurrency",
        "1",
        "--stop-when-empty",
    ];
    let mut worker = start_worker(&cluster, &args);
    assert!(worker.wait_exit(Duration::from_secs(30)).await.success());
    let order: Vec<String> = worker.done().into_iter().map(|e| e.queue).collect();
    assert_eq!(
        order,
        [vec!["high"; 5], vec!["normal"; 5], vec!["low"; 5]].concat()
    );
}

#[tokio::test]
async fn releases_delays_and_failures_work_across_slots() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let failing = Panic {}
        .dispatch()
        .on_queue("high")
        .sent_via(&queue)
        .await
        .to_string();
    let flaky = Flaky { fail_times: 1 }
        .dispatch()
        .on_queue("low")
        .sent_via(&queue)
        .await
        .to_string();
    let delayed = Noop {}
        .dispatch()
        .on_queue("normal")
        .delay(Duration::from_millis(500))
        .sent_via(&queue)
        .await
        .to_string();
    let args = ["--queue", "high,normal,low", "--tries", "2"];
    let mut worker = start_worker(&cluster, &args);
    for (uuid, status) in [(&failing, "FAILED"), (&flaky, "DONE"), (&delayed, "DONE")] {
        worker
            .wait_for_event(Duration::from_secs(30), status, |e| {
                e.uuid == *uuid && e.status == status
            })
            .await;
    }
    worker.signal("TERM");
    assert!(worker.wait_exit(Duration::from_secs(30)).await.success());
    let events = worker.events();
    let statuses = |uuid: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.uuid == uuid && e.status != "RUNNING")
            .map(|e| e.status.clone())
            .collect()
    };
    assert_eq!(statuses(&failing), ["RELEASED", "FAILED"], "{events:?}");
    assert_eq!(statuses(&flaky), ["RELEASED", "DONE"], "{events:?}");
    assert_eq!(statuses(&delayed), ["DONE"], "{events:?}");

    let failed = queue.failed_jobs(10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].uuid, failing);
    assert_eq!(failed[0].queue, "high");
    let keys = cluster.keys_by_node().await;
    let names: Vec<&str> = keys.iter().map(|(_, key)| key.as_str()).collect();
    assert_eq!(names, ["{failed_jobs}", "{failed_jobs}:index"], "{keys:?}");
    assert_eq!(
        keys[0].0, keys[1].0,
        "the failed store spans nodes: {keys:?}"
    );

    // Failing a reservation that is no longer held changes nothing, as on one server.
    let uuid = Noop {}
        .dispatch()
        .on_queue("normal")
        .sent_via(&queue)
        .await
        .to_string();
    let normal = queue.queue_keys("normal");
    assert_eq!(normal, KeyLayout::Cluster.queue("normal"));
    let popped = queue
        .pop(&normal, Duration::from_secs(60), 1, 1000)
        .await
        .unwrap();
    let reserved = &popped.jobs[0];
    let record = FailedJob::new(&uuid, "redis", "normal", reserved.clone(), "boom");
    assert!(queue.fail(&normal, Some(reserved), &record).await.unwrap());
    assert!(!queue.fail(&normal, Some(reserved), &record).await.unwrap());
    assert_eq!(queue.size("normal").await.unwrap().total(), 0);
    let mut conn = queue.connection();
    let stored: u64 = conn.hlen(KeyLayout::Cluster.failed_jobs()).await.unwrap();
    assert_eq!(stored, 2);
    wait_until(
        Duration::from_secs(5),
        "the failed index lists both",
        || {
            let mut conn = queue.connection();
            async move {
                conn.zcard::<_, u64>(KeyLayout::Cluster.failed_jobs_index())
                    .await
                    .unwrap()
                    == 2
            }
        },
    )
    .await;
}

/// A number from `INFO` text: the value after `field:` (up to a comma or the line's end).
fn info_number(info: &str, field: &str) -> u64 {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|value| value.split(',').next().unwrap_or(""))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The sum over the nodes of one `INFO` number, or of one field of a commandstats line.
async fn sum_over_nodes(cluster: &TestCluster, section: &str, field: &str, part: &str) -> u64 {
    let mut total = 0;
    for node in cluster.nodes() {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query_async(&mut node.conn().await)
            .await
            .unwrap();
        total += match part {
            "" => info_number(&info, field),
            part => info
                .lines()
                .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                .map(|stats| info_number(&stats.replace(',', "\n").replace('=', ":"), part))
                .unwrap_or(0),
        };
    }
    total
}

#[tokio::test]
async fn an_idle_worker_blocks_on_every_queue_and_wakes_at_once_for_a_push() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let args = ["--queue", "high,normal,low", "--sleep", "30"];
    let worker = start_worker(&cluster, &args);
    worker.wait_started().await;
    // One BLPOP per queue, each on the node that owns the queue's slot.
    wait_until(
        Duration::from_secs(10),
        "three BLPOPs are in flight",
        || {
            let cluster = &cluster;
            async move { sum_over_nodes(cluster, "clients", "blocked_clients", "").await == 3 }
        },
    )
    .await;
    let pops_before = sum_over_nodes(&cluster, "commandstats", "cmdstat_evalsha", "calls").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pops_idle =
        sum_over_nodes(&cluster, "commandstats", "cmdstat_evalsha", "calls").await - pops_before;
    println!("idle worker on a cluster: {pops_idle} script calls in 1 s");
    assert_eq!(pops_idle, 0, "an idle worker polls");

    for q in QUEUES.iter().rev() {
        let pushed = Instant::now();
        let uuid = Noop {}
            .dispatch()
            .on_queue(*q)
            .sent_via(&queue)
            .await
            .to_string();
        worker
            .wait_for_event(Duration::from_secs(5), "the pushed job ran", |e| {
                e.uuid == uuid && e.status == "DONE"
            })
            .await;
        let latency = pushed.elapsed();
        println!("a job pushed to {q} ran after {latency:?}");
        assert!(latency < Duration::from_secs(2), "woke after {latency:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_prefix_stands_outside_the_hash_tags() {
    let cluster = TestCluster::start();
    let queue = cluster.queue_with(QueueConfig {
        prefix: "app_".to_owned(),
        ..QueueConfig::default()
    });
    let done = Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
    let failed = Panic {}.dispatch().on_queue("q").sent_via(&queue).await;
    let mut worker = start_worker(
        &cluster,
        &["--queue", "q", "--prefix", "app_", "--stop-when-empty"],
    );
    assert!(worker.wait_exit(Duration::from_secs(60)).await.success());
    let events = worker.events();
    let status = |uuid: &str| {
        events
            .iter()
            .filter(|e| e.uuid == uuid && (e.status == "DONE" || e.status == "FAILED"))
            .map(|e| e.status.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(status(&done.to_string()), ["DONE"], "{events:#?}");
    assert_eq!(status(&failed.to_string()), ["FAILED"], "{events:#?}");
    assert!(queue
        .failed_job(&failed.to_string())
        .await
        .unwrap()
        .is_some());
    let keys = cluster.key_names().await;
    assert!(keys.contains(&"app_{failed_jobs}".to_owned()), "{keys:?}");
    assert!(
        keys.contains(&"app_{failed_jobs}:index".to_owned()),
        "{keys:?}"
    );
    assert!(keys.iter().all(|key| key.starts_with("app_")), "{keys:?}");
}

/// What each run of a [`Guarded`] job recorded.
#[derive(Debug, serde::Deserialize)]
struct GuardedRun {
    n: u64,
    started_ms: u64,
    running: i64,
}

/// Waits until `count` [`Guarded`] jobs have started, and reads their runs.
async fn guarded_runs(
    conn: &redjob::queue::connection::Connection,
    count: usize,
) -> Vec<GuardedRun> {
    let what = format!("{count} guarded runs");
    tests::wait_for(Duration::from_secs(60), &what, || {
        let mut conn = conn.clone();
        async move {
            let entries: Vec<String> = conn.lrange(examples::GUARDED_KEY, 0, -1).await.unwrap();
            (entries.len() >= count).then(|| {
                entries
                    .iter()
                    .map(|e| serde_json::from_str(e).unwrap())
                    .collect()
            })
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiters_and_unique_locks_hold_across_slots() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();

    // A unique job's lock is taken with the push, in its queue's slot.
    let rebuild = RebuildIndex {
        shop: 7,
        ..Default::default()
    };
    let holder = rebuild
        .clone()
        .dispatch()
        .on_queue("high")
        .sent_via(&queue)
        .await;
    match rebuild
        .clone()
        .dispatch()
        .on_queue("high")
        .via(&queue)
        .await
    {
        Err(redjob::Error::Duplicate(duplicate)) => assert_eq!(duplicate.holder, holder),
        other => panic!("expected a duplicate, got {other:?}"),
    }
    let keys = cluster.keys_by_node().await;
    let node_of = |name: &str| {
        keys.iter()
            .find(|(_, key)| key == name)
            .map(|(node, _)| *node)
    };
    let lock = "queues:{high}:unique:rebuild-index:7";
    assert!(node_of(lock).is_some(), "{keys:?}");
    assert_eq!(node_of(lock), node_of("queues:{high}"), "{keys:?}");

    // Jobs under a funnel, an overlap lock and a rate limit, spread over three slots.
    let mut bulk = Bulk::via(&queue);
    for n in 0..12u64 {
        let job = Guarded {
            n,
            group: "pdf".into(),
            ms: 150,
            funnel: Some(2),
            ..Default::default()
        };
        bulk.add(job.dispatch().on_queue(QUEUES[n as usize % 3]))
            .unwrap();
    }
    for n in 100..106u64 {
        let job = Guarded {
            n,
            group: "account".into(),
            ms: 100,
            overlap: Some("account".into()),
            ..Default::default()
        };
        bulk.add(job.dispatch().on_queue(QUEUES[n as usize % 3]))
            .unwrap();
    }
    for n in 200..210u64 {
        let job = Guarded {
            n,
            group: "api".into(),
            rate: Some(5),
            ..Default::default()
        };
        bulk.add(job.dispatch().on_queue(QUEUES[n as usize % 3]))
            .unwrap();
    }
    bulk.send().await.unwrap();
    let args = ["--queue", "high,normal,low", "--concurrency", "4"];
    let (_a, _b) = (start_worker(&cluster, &args), start_worker(&cluster, &args));

    let mut conn = queue.connection();
    let runs: Vec<GuardedRun> = guarded_runs(&conn, 28).await;
    let of = |range: std::ops::Range<u64>| runs.iter().filter(move |r| range.contains(&r.n));
    assert_eq!(of(0..12).map(|r| r.running).max(), Some(2), "{runs:?}");
    assert!(of(100..106).all(|r| r.running == 1), "{runs:?}");
    let mut api: Vec<u64> = of(200..210).map(|r| r.started_ms).collect();
    api.sort_unstable();
    for (i, first) in api.iter().enumerate() {
        let within = api[i..].iter().filter(|s| **s < first + 900).count();
        assert!(
            within <= 5,
            "{within} rate-limited runs within 900 ms: {api:?}"
        );
    }

    // Once everything settled, nothing is held: the rebuild's unique lock and every slot and
    // lock are freed.
    wait_until(Duration::from_secs(30), "every queue is empty", || async {
        let mut total = 0;
        for name in QUEUES {
            total += queue.size(name).await.unwrap().total();
        }
        total == 0
    })
    .await;
    let left: Vec<String> = cluster
        .key_names()
        .await
        .into_iter()
        .filter(|key| key.contains(":unique:") || key.contains("funnel") || key.contains("overlap"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    let _ = conn.ping::<String>().await;
}

/// The labels [`examples::Step`] recorded on the cluster, in order.
async fn step_labels(queue: &redjob::RedisQueue) -> Vec<String> {
    tests::steps::recorded_labels(&mut queue.connection()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_and_batches_take_each_step_once_across_slots() {
    use examples::{Caught, Step};
    use redjob::workflow::{Batch, Chain};
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let step = |label: &str, on: &str| Step::new(label).dispatch().on_queue(on.to_owned());
    let failing = Step {
        label: "c-fails".into(),
        fail: true,
        ..Step::default()
    };
    // A chain whose links hop across the three queues' slots, and one that fails.
    let chain = Chain::new(step("a1", "high"))
        .then(step("a2", "low"))
        .then(step("a3", "normal"))
        .catch(Caught { label: "a".into() }.dispatch().on_queue("low"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    Chain::new(step("c1", "normal"))
        .then(failing.dispatch().on_queue("high"))
        .then(step("c3", "low"))
        .catch(Caught { label: "c".into() }.dispatch().on_queue("low"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // A chain with a batch as a link, whose jobs are parked in the batch's slot until then.
    Chain::new(step("d1", "high"))
        .then_batch(Batch::new().jobs((0..3).map(|n| step(&format!("d-row{n}"), QUEUES[n % 3]))))
        .then(step("d2", "normal"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // A batch of jobs on every queue, with a chain in it, and callbacks on another queue.
    let batch = Batch::new()
        .jobs((0..300).map(|n| step(&format!("b{n}"), QUEUES[n % 3])))
        .chain(Chain::new(step("bc1", "low")).then(step("bc2", "high")))
        .then(
            Caught {
                label: "then".into(),
            }
            .dispatch()
            .on_queue("normal"),
        )
        .finally(
            Caught {
                label: "finally".into(),
            }
            .dispatch()
            .on_queue("high"),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    assert_eq!(queue.batch(batch).await.unwrap().unwrap().total, 302);
    // Every key of the chain and of the batch carries its id as the hash tag.
    let keys = cluster.key_names().await;
    assert!(
        keys.contains(&format!("jobs:chain:{{{chain}}}")),
        "{keys:?}"
    );
    assert!(
        keys.contains(&format!("jobs:batch:{{{batch}}}:pending")),
        "{keys:?}"
    );

    let list = QUEUES.join(",");
    let _one = start_worker(&cluster, &["--queue", &list, "--concurrency", "4"]);
    let _two = start_worker(&cluster, &["--queue", &list, "--concurrency", "4"]);
    let wanted = [
        "a3",
        "caught:c",
        "bc2",
        "caught:then",
        "caught:finally",
        "d2",
    ];
    wait_until(
        Duration::from_secs(60),
        "every step and callback ran",
        || async {
            let labels = step_labels(&queue).await;
            wanted.iter().all(|l| labels.iter().any(|x| x == l))
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let labels = step_labels(&queue).await;
    let count = |wanted: &str| labels.iter().filter(|l| *l == wanted).count();
    let position = |wanted: &str| labels.iter().position(|l| l == wanted);
    assert!(
        position("a1") < position("a2") && position("a2") < position("a3"),
        "{labels:?}"
    );
    assert_eq!(count("caught:a"), 0, "the first chain did not fail");
    assert_eq!(
        (
            count("c1"),
            count("c-fails"),
            count("c3"),
            count("caught:c")
        ),
        (1, 1, 0, 1)
    );
    assert!(position("bc1") < position("bc2"));
    for n in 0..3 {
        let row = position(&format!("d-row{n}"));
        assert!(position("d1") < row && row < position("d2"), "{labels:?}");
    }
    assert_eq!(count("d2"), 1);
    assert_eq!((count("caught:then"), count("caught:finally")), (1, 1));
    for n in 0..300 {
        assert_eq!(count(&format!("b{n}")), 1, "b{n}");
    }
    let status = queue.batch(batch).await.unwrap().unwrap();
    assert_eq!((status.total, status.pending, status.failed), (302, 0, 0));
    assert!(status.finished());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_step_taken_again_after_a_crash_pushes_nothing_twice() {
    use examples::Step;
    use redjob::__worker::Settlement;
    use redjob::workflow::{Batch, BatchProgress, Chain, ChainProgress};
    use redjob::Payload;
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let chain = Chain::new(Step::new("first").dispatch().on_queue("high"))
        .then(Step::new("second").dispatch().on_queue("low"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let batch = Batch::new()
        .job(Step::new("only").dispatch().on_queue("normal"))
        .then(Step::new("then").dispatch().on_queue("low"))
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let retry_after = Duration::from_secs(60);

    // The chain's link is done; its worker dies after the steps, before the reservation is
    // removed, and the link runs and settles again: the next link is pushed once.
    let high = queue.queue_keys("high");
    let popped = queue.pop(&high, retry_after, 1, 10).await.unwrap();
    let link = Payload::from_json(&popped.jobs[0]).unwrap();
    let settlement = Settlement::from(ChainProgress::new(chain, link.uuid));
    for _ in 0..2 {
        queue
            .complete(&high, &popped.jobs[0], &settlement)
            .await
            .unwrap();
    }
    assert_eq!(
        queue.size("low").await.unwrap().ready,
        1,
        "the second link, once"
    );

    // The batch's only job, counted twice: then is pushed once.
    let normal = queue.queue_keys("normal");
    let popped = queue.pop(&normal, retry_after, 1, 10).await.unwrap();
    let job = Payload::from_json(&popped.jobs[0]).unwrap();
    let settlement = Settlement::from(BatchProgress::new(batch, job.uuid));
    for _ in 0..2 {
        queue
            .complete(&normal, &popped.jobs[0], &settlement)
            .await
            .unwrap();
    }
    let status = queue.batch(batch).await.unwrap().unwrap();
    assert_eq!((status.total, status.pending), (1, 0));
    assert_eq!(queue.size("low").await.unwrap().ready, 2, "then, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_each_tick_once_on_a_cluster() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let start = |_: usize| {
        WorkerProcess::start_with_env(
            env!("CARGO_BIN_EXE_test_worker"),
            cluster.url(),
            &["--schedule", "--queue", "sched"],
            &[("TEST_SCHEDULE", "tick:* * * * * *:last")],
        )
    };
    let _workers: Vec<WorkerProcess> = (0..2).map(start).collect();
    wait_until(Duration::from_secs(30), "four ticks ran", || async {
        step_labels(&queue).await.len() >= 4
    })
    .await;
    let mut conn = queue.connection();
    let steps = tests::steps::recorded(&mut conn).await;
    tests::steps::assert_each_ran_once(&steps);
    // The schedule's state is in its queue's slot, claimed in the call that pushes the job.
    let keys = cluster.key_names().await;
    assert!(
        keys.contains(&"queues:{sched}:schedule:tick".to_owned()),
        "{keys:?}"
    );
}

#[tokio::test]
async fn a_retry_taken_again_after_a_crash_pushes_nothing_twice() {
    use redjob::payload::counters::{with_counters, Counters};
    use redjob::Payload;
    use tests::jobs_command::JobsCommand;
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let keys = queue.keys().clone();
    let high = queue.queue_keys("high");
    let jobs = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), cluster.url());
    let worker = env!("CARGO_BIN_EXE_test_worker");
    let uuid = tests::scenarios::failed_jobs_on(worker, &cluster, &["high"])
        .await
        .remove(0);
    let mut conn = queue.connection();
    let first: String = conn.hget(keys.failed_jobs(), &uuid).await.unwrap();
    let first_failed_at: String = conn.zscore(keys.failed_jobs_index(), &uuid).await.unwrap();
    let pushed_back = |record: &str| {
        let record: FailedJob = serde_json::from_str(record).unwrap();
        with_counters(&record.payload, Counters::default()).unwrap()
    };

    // The first try of a retry pushed the job as retry_push.lua does (its counters reset, a
    // wake-up token, the guard of this record's retry holding when the failure was recorded)
    // and died before removing the record.
    let _: () = conn.rpush(&high.ready, pushed_back(&first)).await.unwrap();
    let _: () = conn.rpush(&high.notify, 1).await.unwrap();
    // The guard of the job's retries, in its queue's slot: it holds when the failure pushed
    // back was recorded.
    let guard = keys.retried("high", &uuid);
    let _: () = conn.set_ex(&guard, &first_failed_at, 3600).await.unwrap();

    // Taken again, the retry pushes nothing and removes the record.
    let retried = jobs.run(&["retry", &uuid]);
    assert_eq!(retried.code(), Some(0), "{}", retried.stderr);
    assert_eq!(
        retried.stdout,
        format!("Pushed {uuid} back onto queue high.\n")
    );
    let ready: Vec<String> = conn.lrange(&high.ready, 0, -1).await.unwrap();
    assert_eq!(ready, [pushed_back(&first)], "the job was pushed again");
    let tokens: u64 = conn.llen(&high.notify).await.unwrap();
    assert_eq!(tokens, 1);
    let record: Option<String> = conn.hget(keys.failed_jobs(), &uuid).await.unwrap();
    let indexed: Option<f64> = conn.zscore(keys.failed_jobs_index(), &uuid).await.unwrap();
    assert_eq!((record, indexed), (None, None));

    // The job, run again, fails again: a new record, recorded at a new time, which its retry
    // pushes back once more. Then once more, with a record the same byte for byte as
    // the first (failing in the same second with the same exception does that, as it may have
    // just now): a new failure all the same, recorded at a new time, and retried as well.
    for same_bytes in [false, true] {
        let mut run = start_worker(&cluster, &["--queue", "high", "--stop-when-empty"]);
        assert!(run.wait_exit(Duration::from_secs(30)).await.success());
        assert_eq!(queue.size("high").await.unwrap().total(), 0);
        if same_bytes {
            let _: () = conn.hset(keys.failed_jobs(), &uuid, &first).await.unwrap();
        }
        let failed_at: String = conn.zscore(keys.failed_jobs_index(), &uuid).await.unwrap();
        assert_ne!(failed_at, first_failed_at);
        let retried = jobs.run(&["retry", &uuid]);
        assert_eq!(retried.code(), Some(0), "{}", retried.stderr);
        assert_eq!(
            retried.stdout,
            format!("Pushed {uuid} back onto queue high.\n")
        );
        let ready: Vec<String> = conn.lrange(&high.ready, 0, -1).await.unwrap();
        assert_eq!(ready.len(), 1, "same bytes: {same_bytes}; {ready:?}");
        let payload = Payload::from_json(&ready[0]).unwrap();
        assert_eq!(
            (payload.uuid.to_string(), payload.attempts),
            (uuid.clone(), 0)
        );
        let guarded: Option<String> = conn.get(&guard).await.unwrap();
        assert_eq!(guarded, Some(failed_at), "{guard}");
        let record: Option<String> = conn.hget(keys.failed_jobs(), &uuid).await.unwrap();
        assert_eq!(record, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_take_turns_within_their_limits_in_their_queues_slot() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let mut bulk = Bulk::via(&queue);
    // A backlog in one group, then one job in each of four others, on two queues in two slots;
    // one job of each queue delayed, one failing once (released back into its group).
    for (queue_name, base) in [("high", 0u64), ("low", 1000)] {
        for n in base..base + 60 {
            let job = Guarded {
                n,
                group: format!("{queue_name}-big"),
                ms: 20,
                ..Default::default()
            };
            bulk.add(job.dispatch().on_queue(queue_name).group("big"))
                .unwrap();
        }
        for n in base + 100..base + 104 {
            let job = Guarded {
                n,
                group: format!("{queue_name}-quiet"),
                ..Default::default()
            };
            let group = format!("quiet-{n}");
            bulk.add(job.dispatch().on_queue(queue_name).group(group))
                .unwrap();
        }
        let delayed = Guarded {
            n: base + 200,
            group: format!("{queue_name}-delayed"),
            ..Default::default()
        };
        let delayed = delayed.dispatch().on_queue(queue_name).group("later");
        bulk.add(delayed.delay(Duration::from_millis(500))).unwrap();
        let failing = Flaky { fail_times: 1 };
        bulk.add(
            failing
                .dispatch()
                .on_queue(queue_name)
                .group("flaky")
                .tries(2),
        )
        .unwrap();
    }
    bulk.send().await.unwrap();
    let keys = cluster.keys_by_node().await;
    let node_of = |name: &str| {
        keys.iter()
            .find(|(_, key)| key == name)
            .map(|(node, _)| *node)
    };
    for group_key in [
        "queues:{high}:g:big",
        "queues:{high}:groups",
        "queues:{high}:g:later:delayed",
    ] {
        assert!(node_of(group_key).is_some(), "{group_key}: {keys:?}");
        assert_eq!(
            node_of(group_key),
            node_of("queues:{high}:notify"),
            "{keys:?}"
        );
    }
    let args = [
        "--queue",
        "high,low",
        "--concurrency",
        "4",
        "--group-concurrency",
        "2",
        "--tries",
        "2",
    ];
    let (_a, _b) = (start_worker(&cluster, &args), start_worker(&cluster, &args));
    let mut conn = queue.connection();
    let runs: Vec<GuardedRun> = guarded_runs(&conn, 130).await;
    for base in [0u64, 1000] {
        let started_at = |n: u64| runs.iter().find(|r| r.n == n).unwrap().started_ms;
        // Each quiet job starts before the backlog is half done.
        let mut big: Vec<u64> = (base..base + 60).map(started_at).collect();
        big.sort();
        for n in base + 100..base + 104 {
            assert!(
                started_at(n) < big[30],
                "quiet job {n} waited for the backlog"
            );
        }
        // The backlog's group never ran more than 2 at once.
        let of_big = runs.iter().filter(|r| (base..base + 60).contains(&r.n));
        assert!(
            of_big.clone().all(|r| r.running <= 2),
            "{:?}",
            of_big.collect::<Vec<_>>()
        );
    }
    tests::wait_until(
        Duration::from_secs(30),
        "the flaky jobs succeed",
        || async {
            for queue_name in ["high", "low"] {
                if queue.size(queue_name).await.unwrap().total() > 0 {
                    return false;
                }
            }
            true
        },
    )
    .await;
    let failed: usize = conn.hlen("{failed_jobs}").await.unwrap();
    assert_eq!(
        failed, 0,
        "the flaky jobs ran again from their groups and succeeded"
    );
}

#[tokio::test]
async fn a_chain_and_a_batch_of_grouped_jobs_run_in_their_groups_across_slots() {
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    let guarded = |n: u64, group: &str| Guarded {
        n,
        group: group.to_owned(),
        ..Default::default()
    };
    // A batch on `high` in two groups, its `then` on `low` in a group; a chain from `low` to
    // `high`, each link in a group.
    let batch = redjob::workflow::Batch::new()
        .jobs((0..10).map(|n| {
            let group = if n % 2 == 0 { "acme" } else { "beta" };
            guarded(n, group).dispatch().group(group)
        }))
        .then(guarded(50, "acme").dispatch().on_queue("low").group("acme"))
        .on_queue("high")
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    redjob::workflow::Chain::new(guarded(60, "acme").dispatch().on_queue("low").group("acme"))
        .then(
            guarded(61, "beta")
                .dispatch()
                .on_queue("high")
                .group("beta"),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // Each pushed into its group's list, none into a queue's own.
    let mut conn = queue.connection();
    for (key, jobs) in [
        ("queues:{high}:g:acme", 5),
        ("queues:{high}:g:beta", 5),
        ("queues:{low}:g:acme", 1),
        ("queues:{high}", 0),
        ("queues:{low}", 0),
    ] {
        let waiting: usize = conn.llen(key).await.unwrap();
        assert_eq!(waiting, jobs, "{key}");
    }
    let _worker = start_worker(&cluster, &["--queue", "high,low", "--concurrency", "4"]);
    let runs: Vec<GuardedRun> = guarded_runs(&conn, 13).await;
    let mut ran: Vec<u64> = runs.iter().map(|r| r.n).collect();
    ran.sort();
    assert_eq!(ran, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 50, 60, 61]);
    let status = queue.batch(batch).await.unwrap().unwrap();
    assert!(status.finished() && status.pending == 0, "{status:?}");
    // On a cluster a job is counted before its acknowledgement, so the batch can be finished
    // while its last job's reservation is still being deleted.
    for queue_name in ["high", "low"] {
        wait_for_empty_queue(&queue, queue_name, Duration::from_secs(30)).await;
    }
}
