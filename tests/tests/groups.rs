//! Fair queues: a queue's groups served in turn, each within its limits, against worker
//! processes: a group's backlog does not hold back the others, a group's concurrency holds
//! across workers and through a kill -9, a rate spreads a group's starts, delayed and released
//! jobs go back to their group, grouped jobs report their events, and no grouped job is ever in
//! the lists a Laravel worker reads.

use examples::{Guarded, RebuildIndex, GUARDED_FINISHED_KEY, GUARDED_KEY, UNIQUE_KEY};
use redis::AsyncCommands;
use redjob::queue::keys::QueueKeys;
use redjob::workflow::{Batch, Chain, Link};
use redjob::{Bulk, RedisQueue};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use tests::jobs_command::JobsCommand;
use tests::protocol::WorkerCalls;
use tests::worker_process::WorkerProcess;
use tests::{wait_for_empty_queue, wait_until};
use tests::{SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(60);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// A [`Guarded`] job of `group` that runs `ms` milliseconds, told apart by `n`.
fn guarded(n: u64, group: &str, ms: u64) -> Guarded {
    Guarded {
        n,
        group: group.to_owned(),
        ms,
        ..Guarded::default()
    }
}

/// Dispatches to the queue `fair`, in one bulk, a [`Guarded`] job of `ms` milliseconds for
/// each (n, group), in that group.
async fn send_grouped<'g>(
    queue: &RedisQueue,
    ms: u64,
    jobs: impl IntoIterator<Item = (u64, &'g str)>,
) {
    let mut bulk = Bulk::via(queue);
    for (n, group) in jobs {
        bulk.add(
            guarded(n, group, ms)
                .dispatch()
                .on_queue("fair")
                .group(group),
        )
        .unwrap();
    }
    bulk.send().await.unwrap();
}

/// The entries of a Redis list of JSON objects.
async fn entries(redis: &TestRedis, key: &str) -> Vec<Value> {
    let mut conn = redis.conn().await;
    let raw: Vec<String> = conn.lrange(key, 0, -1).await.unwrap();
    raw.iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

/// Waits until `count` Guarded jobs have finished.
async fn finished(redis: &TestRedis, count: usize) {
    wait_until(LONG, format!("{count} jobs finish"), || async move {
        let mut conn = redis.conn().await;
        conn.llen::<_, usize>(GUARDED_FINISHED_KEY).await.unwrap() >= count
    })
    .await;
}

/// The most jobs of one group running at once, from the intervals the jobs recorded: from a
/// start to its finish, or, for an attempt that never finished (its worker was killed at
/// `killed_ms`), to the earliest its reservation can have expired, `held_ms` after the kill.
fn most_at_once(
    started: &[Value],
    done: &[Value],
    group_of: &HashMap<u64, String>,
    (killed_ms, held_ms): (i64, i64),
) -> HashMap<String, usize> {
    let end_of = |entry: &Value| -> i64 {
        let uuid = &entry["uuid"];
        let attempt = entry["attempt"].as_i64().unwrap();
        let finish = done
            .iter()
            .find(|d| d["uuid"] == *uuid && d["attempt"].as_i64() == Some(attempt));
        match finish {
            Some(finish) => finish["finished_ms"].as_i64().unwrap(),
            None => killed_ms + held_ms,
        }
    };
    let mut events: HashMap<String, Vec<(i64, i32)>> = HashMap::new();
    for entry in started {
        let group = group_of[&entry["n"].as_u64().unwrap()].clone();
        let at = events.entry(group).or_default();
        at.push((entry["started_ms"].as_i64().unwrap(), 1));
        at.push((end_of(entry), -1));
    }
    events
        .into_iter()
        .map(|(group, mut at)| {
            // An end and a start at the same millisecond: the end first.
            at.sort();
            let mut running = 0;
            let mut most = 0;
            for (_, change) in at {
                running += change;
                most = most.max(running);
            }
            (group, most as usize)
        })
        .collect()
}

/// The lengths of the lists and sets a Laravel worker reads for `queue`.
async fn laravel_view(redis: &TestRedis, queue: &str) -> (usize, usize, usize) {
    let mut conn = redis.conn().await;
    let ready: usize = conn.llen(format!("queues:{queue}")).await.unwrap();
    let delayed: usize = conn.zcard(format!("queues:{queue}:delayed")).await.unwrap();
    let reserved: usize = conn
        .zcard(format!("queues:{queue}:reserved"))
        .await
        .unwrap();
    (ready, delayed, reserved)
}

#[tokio::test]
async fn a_groups_backlog_does_not_hold_back_the_other_groups() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    send_grouped(&queue, 0, (0..400).map(|n| (n, "big"))).await;
    for n in 400..420 {
        let group = format!("quiet-{n}");
        guarded(n, &group, 0)
            .dispatch()
            .on_queue("fair")
            .group(&group)
            .sent_via(&queue)
            .await;
    }
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    let _worker = start_worker(redis.url(), &["--queue", "fair", "--concurrency", "4"]);
    finished(&redis, 420).await;
    let started = entries(&redis, GUARDED_KEY).await;
    let order: Vec<u64> = started.iter().map(|e| e["n"].as_u64().unwrap()).collect();
    // 21 groups take turns: each quiet job starts within the first rounds, not after the
    // 400 jobs of the group pushed first.
    let last_quiet = order.iter().rposition(|n| *n >= 400).unwrap();
    assert!(
        last_quiet < 100,
        "the last quiet job started {last_quiet}th: {order:?}"
    );
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
}

#[tokio::test]
async fn a_pop_gives_its_groups_more_turns_until_it_has_what_it_asked_for() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // `long` enters the rotation first, then `short` with its one job.
    send_grouped(&queue, 0, (0..20).map(|n| (n, "long"))).await;
    send_grouped(&queue, 0, [(20, "short")]).await;
    let keys = QueueKeys::new("fair");
    let popped = queue.pop(&keys, LONG, 15, 1000).await.unwrap();
    let taken = |group: &str| {
        let group = Some(group.to_owned());
        popped.groups.iter().filter(|g| **g == group).count()
    };
    // Half of the pop for each in the first round of turns: `short` has only one, and
    // `long` takes the rest in the next round, where a pop of one round came back with 9.
    assert_eq!(
        (taken("long"), taken("short")),
        (14, 1),
        "{:?}",
        popped.groups
    );
    // The queue's own list is empty, and the rotation keeps what has jobs left.
    let mut conn = redis.conn().await;
    let rotation: Vec<String> = conn.lrange("queues:fair:groups", 0, -1).await.unwrap();
    assert_eq!(rotation, ["long"]);
    let popped = queue.pop(&keys, LONG, 15, 1000).await.unwrap();
    assert_eq!(popped.jobs.len(), 6);
}

#[tokio::test]
async fn pops_of_one_job_serve_the_queues_own_list_as_one_turn_among_its_groups() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    for n in 0..9 {
        guarded(n, "", 0)
            .dispatch()
            .on_queue("fair")
            .sent_via(&queue)
            .await;
    }
    send_grouped(&queue, 0, (9..18).map(|n| (n, "acme"))).await;
    send_grouped(&queue, 0, (18..27).map(|n| (n, "beta"))).await;
    let keys = QueueKeys::new("fair");
    let mut taken = Vec::new();
    for _ in 0..9 {
        let popped = queue.pop(&keys, LONG, 1, 1000).await.unwrap();
        assert_eq!(popped.groups.len(), 1);
        taken.push(popped.groups[0].clone().unwrap_or_else(|| "own".into()));
    }
    // One turn each, in the rotation's order: before, the own list's backlog took every pop.
    assert_eq!(
        taken,
        ["own", "acme", "beta", "own", "acme", "beta", "own", "acme", "beta"]
    );
}

#[tokio::test]
async fn a_group_both_rotating_and_due_is_read_whole() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // acme has a ready job (in the rotation) and a delayed one (in the due set).
    send_grouped(&queue, 0, [(0, "acme")]).await;
    guarded(1, "acme", 0)
        .dispatch()
        .on_queue("fair")
        .group("acme")
        .delay(60)
        .sent_via(&queue)
        .await;
    let listed = queue.groups("fair").list().await.unwrap();
    assert_eq!(listed.groups.len(), 1);
    assert!(
        !listed.partial,
        "one group read whole is not partial: {listed:?}"
    );
    let size = queue.size("fair").await.unwrap();
    assert_eq!((size.groups, size.groups_partial), (1, false));
}

#[tokio::test]
async fn a_grouped_dispatch_is_one_script_call_that_brings_its_group_in() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    // The first dispatches load the scripts.
    send_grouped(&queue, 0, [(0, "acme")]).await;
    let unique = |shop| RebuildIndex {
        shop,
        ms: 0,
        fail_first: 0,
    };
    unique(1)
        .dispatch()
        .on_queue("fair")
        .group("acme")
        .sent_via(&queue)
        .await;
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    send_grouped(&queue, 0, [(1, "beta"), (2, "beta")]).await;
    guarded(3, "gamma", 0)
        .dispatch()
        .on_queue("fair")
        .group("gamma")
        .delay(60)
        .sent_via(&queue)
        .await;
    unique(2)
        .dispatch()
        .on_queue("fair")
        .group("delta")
        .sent_via(&queue)
        .await;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    let calls = |command: &str| {
        let line = stats
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{command}:")));
        line.map(|l| l.split(['=', ',']).nth(1).unwrap().to_owned())
    };
    // One EVALSHA each: the push and the group's entry in one step, no script sent again.
    assert_eq!(calls("evalsha").as_deref(), Some("3"), "{stats}");
    assert_eq!(calls("script|load"), None, "{stats}");
    let rotation: Vec<String> = conn.lrange("queues:fair:groups", 0, -1).await.unwrap();
    assert_eq!(rotation, ["acme", "beta"]);
    // A wake-up token for each group that entered the rotation (acme, beta), however many
    // jobs it has; one for the delayed job, the earliest of its group, so that an idle worker
    // re-arms its timer; and one for each unique job, whose group the next pop brings in.
    let tokens: usize = conn.llen("queues:fair:notify").await.unwrap();
    assert_eq!(tokens, 5);
    // The delayed job's group waits in the due set, scored when its job is due.
    let due: Option<f64> = conn
        .zscore("queues:fair:groups:due", "gamma")
        .await
        .unwrap();
    let in_a_minute = redis.server_time().await + 60.0;
    assert!(
        due.is_some_and(|at| (at - in_a_minute).abs() < 5.0),
        "gamma due at {due:?}, expected about {in_a_minute}"
    );
    // The unique job's group is scored due now: the next pop brings it into the rotation.
    let due: Option<f64> = conn
        .zscore("queues:fair:groups:due", "delta")
        .await
        .unwrap();
    assert_eq!(due, Some(0.0));
    let keys = QueueKeys::new("fair");
    let popped = queue.pop(&keys, LONG, 10, 1000).await.unwrap();
    assert!(
        popped.groups.contains(&Some("delta".to_owned())),
        "{:?}",
        popped.groups
    );
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
}

#[tokio::test]
async fn a_groups_concurrency_holds_across_four_workers_and_a_kill() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let args = [
        "--queue",
        "fair",
        "--concurrency",
        "5",
        "--group-concurrency",
        "2",
        "--retry-after",
        "2",
        "--tries",
        "3",
    ];
    let mut group_of = HashMap::new();
    // Two long jobs of acme, taken by the first worker, which is then killed with them.
    for n in [100, 101] {
        group_of.insert(n, "acme".to_owned());
        guarded(n, "acme", 3000)
            .dispatch()
            .on_queue("fair")
            .group("acme")
            .sent_via(&queue)
            .await;
    }
    let mut first = start_worker(redis.url(), &args);
    wait_until(LONG, "the long jobs start", || async {
        entries(&redis, GUARDED_KEY).await.len() == 2
    })
    .await;
    let jobs: Vec<(u64, &str)> = (0..24)
        .map(|n| (n, if n % 2 == 0 { "acme" } else { "beta" }))
        .collect();
    group_of.extend(jobs.iter().map(|(n, group)| (*n, group.to_string())));
    send_grouped(&queue, 300, jobs).await;
    let others: Vec<WorkerProcess> = (0..3).map(|_| start_worker(redis.url(), &args)).collect();
    // Beta runs on the other workers meanwhile; acme waits for its leases.
    wait_until(LONG, "beta's jobs run", || async {
        entries(&redis, GUARDED_KEY).await.len() >= 6
    })
    .await;
    first.kill();
    let killed_ms = examples::now_ms() as i64;
    finished(&redis, 26).await;
    let started = entries(&redis, GUARDED_KEY).await;
    let done = entries(&redis, GUARDED_FINISHED_KEY).await;
    let retried: Vec<u64> = started
        .iter()
        .filter(|e| e["attempt"].as_u64() == Some(2))
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert!(
        retried.contains(&100) && retried.contains(&101),
        "the killed worker's long jobs run again: {retried:?}"
    );
    // The killed worker renewed its reservations each third of --retry-after (2 s): they
    // expired between 1.33 s and 2 s after the kill, and no sooner may acme run more.
    let most = most_at_once(&started, &done, &group_of, (killed_ms, 1300));
    assert_eq!(most.get("acme"), Some(&2), "{most:?}");
    assert_eq!(most.get("beta"), Some(&2), "{most:?}");
    drop(others);
}

#[tokio::test]
async fn a_groups_rate_spreads_its_starts() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    send_grouped(&queue, 0, (0..10).map(|n| (n, "acme"))).await;
    let _worker = start_worker(
        redis.url(),
        &[
            "--queue",
            "fair",
            "--concurrency",
            "10",
            "--group-rate",
            "5/1",
        ],
    );
    finished(&redis, 10).await;
    let mut starts: Vec<i64> = entries(&redis, GUARDED_KEY)
        .await
        .iter()
        .map(|e| e["started_ms"].as_i64().unwrap())
        .collect();
    starts.sort();
    // A burst of 5, then one each 200 ms: the 10th about a second after the first.
    let spread = starts[9] - starts[0];
    assert!(
        (900..5000).contains(&spread),
        "10 starts over {spread} ms: {starts:?}"
    );
    let burst = starts[4] - starts[0];
    assert!(burst < 500, "the first 5 started over {burst} ms");
}

#[tokio::test]
async fn delayed_and_released_jobs_go_back_to_their_group() {
    let redis = TestRedis::start();
    let queue: RedisQueue = redis.queue();
    // Fails twice: released into its group's delayed set after the first, failed after the
    // second.
    let failing = Guarded {
        fail: true,
        ..guarded(1, "acme", 0)
    };
    failing
        .dispatch()
        .on_queue("fair")
        .group("acme")
        .tries(2)
        .backoff(1)
        .sent_via(&queue)
        .await;
    guarded(2, "acme", 0)
        .dispatch()
        .on_queue("fair")
        .group("acme")
        .delay(Duration::from_millis(1500))
        .sent_via(&queue)
        .await;
    let mut conn = redis.conn().await;
    let delayed: usize = conn.zcard("queues:fair:g:acme:delayed").await.unwrap();
    assert_eq!(delayed, 1);
    let _worker = start_worker(redis.url(), &["--queue", "fair"]);
    wait_until(
        LONG,
        "the failing job is released into its group",
        || async {
            let mut conn = redis.conn().await;
            let finished: usize = conn.llen(GUARDED_FINISHED_KEY).await.unwrap();
            let released: usize = conn.zcard("queues:fair:g:acme:delayed").await.unwrap();
            finished >= 1 && released >= 1
        },
    )
    .await;
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    finished(&redis, 3).await;
    let started = entries(&redis, GUARDED_KEY).await;
    let attempts: Vec<(u64, u64)> = started
        .iter()
        .map(|e| (e["n"].as_u64().unwrap(), e["attempt"].as_u64().unwrap()))
        .collect();
    assert!(
        attempts.contains(&(1, 1)) && attempts.contains(&(1, 2)),
        "{attempts:?}"
    );
    assert!(attempts.contains(&(2, 1)), "{attempts:?}");
    wait_until(LONG, "the failing job is failed for good", || async {
        let mut conn = redis.conn().await;
        conn.hlen::<_, usize>("failed_jobs").await.unwrap() == 1
    })
    .await;
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    let mut conn = redis.conn().await;
    for key in [
        "queues:fair:g:acme",
        "queues:fair:g:acme:delayed",
        "queues:fair:g:acme:reserved",
        "queues:fair:groups",
        "queues:fair:groups:rotating",
    ] {
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(kind, "none", "{key} is left");
    }
}

#[tokio::test]
async fn a_unique_job_is_unique_across_its_queues_groups_and_settles_in_its_own() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // Fails once (released back into its group with its lock kept), then succeeds; its
    // overlap lock makes it settle through the script that frees what it holds.
    let rebuild = RebuildIndex {
        shop: 7,
        ms: 100,
        fail_first: 1,
    };
    let holder = rebuild
        .clone()
        .dispatch()
        .on_queue("fair")
        .group("acme")
        .backoff(0)
        .sent_via(&queue)
        .await;
    match rebuild
        .clone()
        .dispatch()
        .on_queue("fair")
        .group("beta")
        .via(&queue)
        .await
    {
        Err(redjob::Error::Duplicate(duplicate)) => assert_eq!(duplicate.holder, holder),
        other => panic!("expected a duplicate, got {other:?}"),
    }
    let mut conn = redis.conn().await;
    let waiting: usize = conn.llen("queues:fair:g:acme").await.unwrap();
    assert_eq!(waiting, 1);
    let _worker = start_worker(redis.url(), &["--queue", "fair"]);
    wait_until(
        LONG,
        "the rebuild succeeds on its second attempt",
        || async {
            entries(&redis, UNIQUE_KEY).await.len() == 2
                && queue.size("fair").await.unwrap().total() == 0
        },
    )
    .await;
    let runs: Vec<u64> = entries(&redis, UNIQUE_KEY)
        .await
        .iter()
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(runs, [1, 2]);
    // Done, it frees its lock: the next one may wait in another group.
    rebuild
        .dispatch()
        .on_queue("fair")
        .group("beta")
        .sent_via(&queue)
        .await;
    wait_until(LONG, "the next rebuild runs", || async {
        entries(&redis, UNIQUE_KEY).await.len() == 4
    })
    .await;
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
}

#[tokio::test]
async fn operators_see_a_queues_groups_and_pause_resume_and_limit_them() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let jobs = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let mut bulk = Bulk::via(&queue);
    for n in 0..12u64 {
        let group = ["acme", "acme", "acme", "beta"][n as usize % 4];
        bulk.add(
            guarded(n, group, 0)
                .dispatch()
                .on_queue("fair")
                .group(group),
        )
        .unwrap();
    }
    bulk.add(guarded(99, "", 0).dispatch().on_queue("fair"))
        .unwrap();
    bulk.send().await.unwrap();
    // The queue's sizes count its groups' jobs.
    let size = queue.size("fair").await.unwrap();
    assert_eq!(
        (size.ready, size.groups, size.groups_partial),
        (13, 2, false)
    );
    let sizes = jobs.json(&["size", "fair"]);
    assert_eq!(sizes[0]["ready"], 13, "{sizes}");
    assert_eq!(sizes[0]["groups"], 2, "{sizes}");
    // The busiest first; pausing one, limiting the other.
    let listed = jobs.json(&["groups", "fair", "--pause", "acme"]);
    assert_eq!(listed["groups"], 2, "{listed}");
    assert_eq!(listed["busiest"][0]["name"], "acme", "{listed}");
    assert_eq!(listed["busiest"][0]["ready"], 9, "{listed}");
    assert_eq!(listed["busiest"][0]["paused"], true, "{listed}");
    let limited = jobs.json(&[
        "groups",
        "fair",
        "--set",
        "beta",
        "--concurrency",
        "1",
        "--rate",
        "5/1",
    ]);
    assert_eq!(
        limited["busiest"][1]["limits"]["concurrency"], 1,
        "{limited}"
    );
    assert_eq!(limited["busiest"][1]["limits"]["rate"], "5/1", "{limited}");
    // A worker runs the queue's own job and beta's, not paused acme's.
    let _worker = start_worker(redis.url(), &["--queue", "fair"]);
    finished(&redis, 4).await;
    let listed = jobs.json(&["groups", "fair"]);
    assert_eq!(listed["busiest"][0]["ready"], 9, "{listed}");
    assert_eq!(listed["busiest"][0]["state"], "blocked", "{listed}");
    let ran: Vec<u64> = entries(&redis, GUARDED_KEY)
        .await
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert!(ran.iter().all(|n| n % 4 == 3 || *n == 99), "{ran:?}");
    // Resumed, acme's jobs run.
    jobs.json(&["groups", "fair", "--resume", "acme"]);
    finished(&redis, 13).await;
    wait_for_empty_queue(&queue, "fair", LONG).await;
}

#[tokio::test]
async fn a_group_at_its_limit_runs_its_next_job_as_soon_as_one_ends() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    send_grouped(&queue, 50, (0..10).map(|n| (n, "acme"))).await;
    // An idle worker wakes for a token, or after --sleep: the group that comes back when its
    // job ends must bring one, or each job would wait the 30 s.
    let _worker = start_worker(
        redis.url(),
        &[
            "--queue",
            "fair",
            "--concurrency",
            "4",
            "--group-concurrency",
            "1",
            "--sleep",
            "30",
        ],
    );
    finished(&redis, 10).await;
    let started = entries(&redis, GUARDED_KEY).await;
    let done = entries(&redis, GUARDED_FINISHED_KEY).await;
    let first = started
        .iter()
        .map(|e| e["started_ms"].as_i64().unwrap())
        .min()
        .unwrap();
    let last = done
        .iter()
        .map(|e| e["finished_ms"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(
        last - first < 10_000,
        "10 jobs of 50 ms, one at a time, took {} ms",
        last - first
    );
    let most = most_at_once(
        &started,
        &done,
        &(0..10).map(|n| (n, "acme".to_owned())).collect(),
        (0, 0),
    );
    assert_eq!(most.get("acme"), Some(&1), "{most:?}");
}

#[tokio::test]
async fn grouped_jobs_of_a_queue_with_events_report_completed_and_leave_no_reservation() {
    use futures_util::StreamExt;

    let redis = TestRedis::start();
    let queue = redis.queue();
    queue.set_events("fair", Some(100_000)).await.unwrap();
    let live = redis.queue().events("fair").await.unwrap();
    let mut uuids = Vec::new();
    for n in 0..30 {
        let job = guarded(n, "", 0).dispatch().on_queue("fair");
        let job = match n % 3 {
            0 => job,
            1 => job.group("acme"),
            _ => job.group("beta"),
        };
        uuids.push(job.via(&queue).await.unwrap().to_string());
    }
    let collected = tokio::spawn(async move {
        let mut live = std::pin::pin!(live);
        let mut completed = Vec::new();
        while completed.len() < 30 {
            let event: redjob::status::QueueEvent = live.next().await.unwrap();
            if event.event == "completed" {
                completed.push(event.uuid);
            }
        }
        completed
    });
    let _worker = start_worker(redis.url(), &["--queue", "fair", "--concurrency", "8"]);
    let mut completed = tokio::time::timeout(LONG, collected)
        .await
        .expect("30 completed events")
        .unwrap();
    completed.sort();
    uuids.sort();
    assert_eq!(completed, uuids, "each job's completed event, once");
    let mut conn = redis.conn().await;
    for key in ["queues:fair:g:acme:reserved", "queues:fair:g:beta:reserved"] {
        let left: usize = conn.zcard(key).await.unwrap();
        assert_eq!(left, 0, "{key}");
    }
    wait_for_empty_queue(&queue, "fair", LONG).await;
}

#[tokio::test]
async fn a_weighted_group_takes_its_weight_in_jobs_at_each_of_its_turns() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let jobs = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    // heavy: n 0..90, light-a: 100..130, light-b: 200..230; heavy enters the rotation first.
    let heavy = (0..90).map(|n| (n, "heavy"));
    let light_a = (100..130).map(|n| (n, "light-a"));
    send_grouped(
        &queue,
        0,
        heavy
            .chain(light_a)
            .chain((200..230).map(|n| (n, "light-b"))),
    )
    .await;
    let listed = jobs.json(&["groups", "fair", "--weight", "heavy", "3"]);
    let heavy = listed["busiest"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "heavy")
        .unwrap();
    assert_eq!(heavy["weight"], 3, "{listed}");
    assert_eq!(listed["busiest"][1]["weight"], 1, "{listed}");
    let refused = jobs.run(&["groups", "fair", "--weight", "heavy", "0"]);
    assert_ne!(refused.code(), Some(0), "a weight of 0 is refused");

    // One job at a time: each pop takes one or a few, so heavy's turn spans pops.
    let _worker = start_worker(redis.url(), &["--queue", "fair", "--concurrency", "1"]);
    finished(&redis, 150).await;
    let started = entries(&redis, GUARDED_KEY).await;
    let first: Vec<u64> = started
        .iter()
        .take(50)
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    let count = |range: std::ops::Range<u64>| first.iter().filter(|n| range.contains(n)).count();
    let (heavy, light_a, light_b) = (count(0..90), count(100..130), count(200..230));
    // Three to one to one: 30, 10 and 10 of the first 50, give or take a turn.
    assert!(
        (27..=33).contains(&heavy) && (7..=13).contains(&light_a) && (7..=13).contains(&light_b),
        "heavy {heavy}, light-a {light_a}, light-b {light_b} of the first 50: {first:?}"
    );
    wait_for_empty_queue(&queue, "fair", LONG).await;
    let mut conn = redis.conn().await;
    let turn: Option<String> = conn
        .hget("queues:fair:groups:limits", "heavy:s")
        .await
        .unwrap();
    assert_eq!(
        turn, None,
        "no turn is left open once heavy's jobs are done"
    );
}

#[tokio::test]
async fn a_chains_links_run_in_their_groups_in_order() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = Chain::new(guarded(1, "acme", 0).dispatch().group("acme"))
        .then(guarded(2, "beta", 0).dispatch().group("beta"))
        .then(guarded(3, "acme", 0).dispatch().group("acme").delay(1))
        .on_queue("fair")
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // The first link waits in its group; the others keep theirs in the chain's list.
    let mut conn = redis.conn().await;
    let first: usize = conn.llen("queues:fair:g:acme").await.unwrap();
    assert_eq!(first, 1);
    let kept: Vec<String> = conn
        .lrange(format!("jobs:chain:{id}"), 0, -1)
        .await
        .unwrap();
    let groups: Vec<Option<String>> = kept
        .iter()
        .map(|l| Link::decode(l).unwrap().group)
        .collect();
    assert_eq!(groups, [Some("beta".to_owned()), Some("acme".to_owned())]);
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));

    let _worker = start_worker(redis.url(), &["--queue", "fair"]);
    finished(&redis, 3).await;
    let order: Vec<u64> = entries(&redis, GUARDED_KEY)
        .await
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [1, 2, 3]);
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    wait_for_empty_queue(&queue, "fair", LONG).await;
}

#[tokio::test]
async fn a_batch_of_grouped_jobs_keeps_each_groups_limit_and_calls_back_in_its_group() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let group_of = |n: u64| if n % 2 == 0 { "acme" } else { "beta" };
    let id = Batch::new()
        .then(guarded(99, "beta", 0).dispatch().group("beta"))
        .jobs((0..20).map(|n| guarded(n, group_of(n), 30).dispatch().group(group_of(n))))
        .on_queue("fair")
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    // At most one of each group at a time: a group at its limit must come back as soon as
    // its job is acknowledged, or its next job waits for the reservation to expire.
    let _worker = start_worker(
        redis.url(),
        &[
            "--queue",
            "fair",
            "--concurrency",
            "8",
            "--group-concurrency",
            "1",
        ],
    );
    finished(&redis, 21).await;
    let status = queue.batch(id).await.unwrap().unwrap();
    assert!(status.finished(), "{status:?}");
    assert_eq!((status.total, status.pending, status.failed), (20, 0, 0));
    let started = entries(&redis, GUARDED_KEY).await;
    let done = entries(&redis, GUARDED_FINISHED_KEY).await;
    let then_started = started
        .iter()
        .find(|e| e["n"] == 99)
        .map(|e| e["started_ms"].as_i64().unwrap())
        .unwrap();
    let last_done = done
        .iter()
        .filter(|e| e["n"] != 99)
        .map(|e| e["finished_ms"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(
        then_started >= last_done,
        "then ran before the last job ended"
    );
    let groups: HashMap<u64, String> = (0..20)
        .map(|n| (n, group_of(n).to_owned()))
        .chain([(99, "beta".to_owned())])
        .collect();
    let most = most_at_once(&started, &done, &groups, (0, 0));
    assert_eq!(most.get("acme"), Some(&1), "{most:?}");
    assert_eq!(most.get("beta"), Some(&1), "{most:?}");
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    wait_for_empty_queue(&queue, "fair", LONG).await;
}

#[tokio::test]
async fn a_scheduled_grouped_job_is_fired_into_its_group() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let job = guarded(1, "acme", 0)
        .dispatch()
        .on_queue("fair")
        .group("acme");
    let schedule = redjob::schedule::Schedule::new("grouped", job).every_second();
    let fired = queue.fire(&schedule, chrono::Utc::now()).await.unwrap();
    assert!(
        matches!(fired, redjob::schedule::Fired::Pushed(_)),
        "{fired:?}"
    );
    let mut conn = redis.conn().await;
    let in_group: usize = conn.llen("queues:fair:g:acme").await.unwrap();
    assert_eq!(in_group, 1);
    assert_eq!(laravel_view(&redis, "fair").await, (0, 0, 0));
    let _worker = start_worker(redis.url(), &["--queue", "fair"]);
    finished(&redis, 1).await;
    wait_for_empty_queue(&queue, "fair", LONG).await;
}

#[tokio::test]
async fn a_groups_job_held_by_a_killed_worker_comes_back_after_its_group_was_at_its_limit() {
    // acme's two jobs are both reserved, its list emptied exactly; the next pop finds acme at
    // its limit of 2 and blocks it; the short job's end brings acme back from the blocked
    // set, with nothing ready. The long job's worker is then killed: its reservation must
    // still be found when it expires, though acme is in no rotation.
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut bulk = Bulk::via(&queue);
    for (n, ms) in [(1, 50), (2, 20_000)] {
        bulk.add(
            guarded(n, "acme", ms)
                .dispatch()
                .on_queue("fair")
                .group("acme"),
        )
        .unwrap();
    }
    bulk.send().await.unwrap();
    let args = [
        "--queue",
        "fair",
        "--concurrency",
        "4",
        "--group-concurrency",
        "2",
        "--retry-after",
        "2",
        "--tries",
        "3",
    ];
    let mut first = start_worker(redis.url(), &args);
    finished(&redis, 1).await;
    assert_eq!(
        entries(&redis, GUARDED_KEY).await.len(),
        2,
        "the long job runs"
    );
    first.kill();
    let _second = start_worker(redis.url(), &args);
    wait_until(LONG, "the long job starts again", || async {
        entries(&redis, GUARDED_KEY).await.len() >= 3
    })
    .await;
    let again = entries(&redis, GUARDED_KEY).await;
    assert_eq!(again[2]["n"], 2, "{again:?}");
}
