//! Dispatch in a PostgreSQL transaction, against a real PostgreSQL and a real Redis: a job
//! exists if and only if its transaction commits, reaches Redis once however often it is
//! relayed, keeps its due time, and a relay wakes on the commit.

use std::time::Duration;

use examples::{Noop, Record, ReindexSearch};
use redjob::outbox::{Outbox, OutboxError, Relay};
use redjob::{
    job, Bulk, Durability, Job, JobContext, JobResult, Payload, PendingDispatch, RedisQueue,
};
use redjob_worker::{Exit, Worker, WorkerConfig};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection, PgPool};
use std::collections::HashMap;
use tests::jobs_command::JobsCommand;
use tests::records::{records_len, runs_by_uuid, wait_for_runs};
use tests::worker_process::WorkerProcess;
use tests::{kept_rows, outbox_rows, wait_for, wait_until, TestPostgres, TestRedis};

const LONG: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
struct Welcome {
    user: i64,
}

#[job(name = "outbox.welcome", unique_for = 60)]
impl Job for Welcome {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }

    fn unique_id(&self) -> String {
        self.user.to_string()
    }
}

/// Looks for its row, and says whether it found it (`finds`: `<id>:found` or `<id>:missing`).
#[derive(Serialize, Deserialize)]
struct FindRow {
    id: i64,
}

#[job(name = "outbox.find_row")]
impl Job for FindRow {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let pool = ctx.try_state::<PgPool>().ok_or("the worker has no pool")?;
        let found: Option<i64> = sqlx::query_scalar("SELECT id FROM items WHERE id = $1")
            .bind(self.id)
            .fetch_optional(pool)
            .await?;
        let entry = format!(
            "{}:{}",
            self.id,
            if found.is_some() { "found" } else { "missing" }
        );
        let redis = ctx.redis().ok_or("no Redis")?;
        redis
            .query::<()>(redjob::redis::cmd("RPUSH").arg("finds").arg(entry))
            .await?;
        Ok(())
    }
}

/// Dispatches into the default outbox through `conn` (a transaction or a savepoint); the
/// job's uuid.
async fn written<J: Job>(conn: &mut PgConnection, dispatch: PendingDispatch<J>) -> uuid::Uuid {
    dispatch.in_transaction(conn).await.unwrap()
}

/// Dispatches in a transaction of its own, committed; the job's uuid.
async fn committed<J: Job>(pool: &PgPool, dispatch: PendingDispatch<J>) -> uuid::Uuid {
    let mut tx = pool.begin().await.unwrap();
    let uuid = written(&mut tx, dispatch).await;
    tx.commit().await.unwrap();
    uuid
}

async fn setup() -> (TestPostgres, TestRedis, PgPool, RedisQueue) {
    let postgres = TestPostgres::start();
    let redis = TestRedis::start();
    let pool = PgPool::connect(&postgres.url()).await.unwrap();
    Outbox::default().create_table(&pool).await.unwrap();
    let queue = redis.queue();
    (postgres, redis, pool, queue)
}

/// Waits until `default` holds no job: none ready, delayed or reserved.
async fn drained(queue: &RedisQueue) {
    wait_until(LONG, "the default queue is drained", || async {
        queue.size("default").await.unwrap().total() == 0
    })
    .await;
}

/// The uuids of the jobs waiting on `queue`'s ready list, oldest first.
async fn ready_uuids(redis: &TestRedis, queue: &str) -> Vec<String> {
    let payloads: Vec<String> = redjob::redis::cmd("LRANGE")
        .arg(redjob::queue::keys::QueueKeys::new(queue).ready)
        .arg(0)
        .arg(-1)
        .query_async(&mut redis.conn().await)
        .await
        .unwrap();
    payloads
        .iter()
        .map(|p| Payload::from_json(p).unwrap().uuid.to_string())
        .collect()
}

/// Keeps a copy of the outbox's rows, to put them back as a relay that pushed them and died
/// before its commit leaves them.
async fn save_rows(pool: &PgPool) {
    sqlx::query(
        "CREATE TABLE saved_outbox AS \
         SELECT uuid, queue, job, link, unique_key, unique_ms FROM redjob_outbox",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// Puts the saved row of the job `uuid` back into the outbox ([`save_rows`]).
async fn put_back(pool: &PgPool, uuid: &str) {
    sqlx::query(
        "INSERT INTO redjob_outbox (uuid, queue, job, link, unique_key, unique_ms) \
         SELECT uuid, queue, job, link, unique_key, unique_ms FROM saved_outbox \
         WHERE uuid = $1::uuid",
    )
    .bind(uuid)
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_committed_dispatch_is_relayed_once_and_a_rolled_back_one_never_exists() {
    let (_postgres, redis, pool, queue) = setup().await;

    // Committed.
    let mut tx = pool.begin().await.unwrap();
    let committed = written(&mut tx, Noop {}.dispatch().via(&queue)).await;
    assert_eq!(
        queue.size("default").await.unwrap().total(),
        0,
        "nothing in Redis before the commit"
    );
    tx.commit().await.unwrap();
    // Rolled back.
    let mut tx = pool.begin().await.unwrap();
    written(&mut tx, Noop {}.dispatch().via(&queue)).await;
    tx.rollback().await.unwrap();
    // A savepoint rolled back inside a committed transaction.
    let mut tx = pool.begin().await.unwrap();
    let mut savepoint = tx.begin().await.unwrap();
    written(&mut savepoint, Noop {}.dispatch().via(&queue)).await;
    savepoint.rollback().await.unwrap();
    let mut bulk = Bulk::via(&queue);
    bulk.add(Noop {}.dispatch()).unwrap();
    bulk.add(Noop {}.dispatch().on_queue("other")).unwrap();
    let bulked = bulk.in_transaction(&mut tx).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(outbox_rows(&pool).await, 3);

    let relay = Relay::new(pool.clone(), queue.clone());
    assert_eq!(relay.relay_once().await.unwrap(), 3);
    assert_eq!(outbox_rows(&pool).await, 0);
    assert_eq!(
        ready_uuids(&redis, "default").await,
        [committed.to_string(), bulked[0].to_string()]
    );
    assert_eq!(ready_uuids(&redis, "other").await, [bulked[1].to_string()]);
    assert_eq!(
        relay.relay_once().await.unwrap(),
        0,
        "nothing is relayed twice"
    );
}

#[tokio::test]
async fn rows_left_by_a_relay_that_died_before_its_commit_push_nothing_twice() {
    let (_postgres, redis, pool, queue) = setup().await;
    let uuid = committed(&pool, Noop {}.dispatch().via(&queue)).await;
    save_rows(&pool).await;

    let relay = Relay::new(pool.clone(), queue.clone());
    assert_eq!(relay.relay_once().await.unwrap(), 1);
    // The row as a relay that pushed and then died would have left it: back in the table.
    put_back(&pool, &uuid.to_string()).await;
    assert_eq!(
        relay.relay_once().await.unwrap(),
        1,
        "the row is taken again"
    );
    assert_eq!(outbox_rows(&pool).await, 0);
    assert_eq!(
        ready_uuids(&redis, "default").await,
        [uuid.to_string()],
        "and pushed once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_relay_deletes_its_rows_only_once_the_replicas_have_their_jobs() {
    let postgres = TestPostgres::start();
    let (redis, replica) = tokio::task::block_in_place(TestRedis::start_replicated);
    let pool = PgPool::connect(&postgres.url()).await.unwrap();
    Outbox::default().create_table(&pool).await.unwrap();
    let queue = redis.queue();
    let uuid = committed(&pool, Noop {}.dispatch().via(&queue)).await;

    let unconfirmed = Durability::replicas(2).within(Duration::from_millis(200));
    let relay = Relay::new(pool.clone(), queue.clone()).durability(unconfirmed);
    let err = relay.relay_once().await.unwrap_err();
    assert!(
        matches!(&err, OutboxError::Queue(redjob::Error::NotDurable(d)) if d.jobs == [uuid]),
        "{err:?}"
    );
    assert_eq!(outbox_rows(&pool).await, 1, "the row stays");
    assert_eq!(ready_uuids(&redis, "default").await, [uuid.to_string()]);

    let relay = Relay::new(pool.clone(), queue.clone()).durability(Durability::replicas(1));
    assert_eq!(relay.relay_once().await.unwrap(), 1);
    assert_eq!(
        outbox_rows(&pool).await,
        0,
        "deleted once the replica confirmed"
    );
    assert_eq!(
        ready_uuids(&redis, "default").await,
        [uuid.to_string()],
        "pushed once"
    );
    assert_eq!(ready_uuids(&replica, "default").await, [uuid.to_string()]);
}

#[tokio::test]
async fn a_delayed_job_keeps_its_due_time_however_late_it_is_relayed() {
    let (_postgres, redis, pool, queue) = setup().await;
    let dispatched_at = redis.server_time().await;
    committed(&pool, Noop {}.dispatch().delay(30).via(&queue)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // a relay that comes late
    Relay::new(pool.clone(), queue.clone())
        .relay_once()
        .await
        .unwrap();
    let scores: Vec<(String, f64)> = redjob::redis::cmd("ZRANGE")
        .arg("queues:default:delayed")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut redis.conn().await)
        .await
        .unwrap();
    assert_eq!(scores.len(), 1);
    let due = scores[0].1;
    assert!(
        (due - (dispatched_at + 30.0)).abs() < 1.0,
        "due {due}, dispatched at {dispatched_at}: due 30 s after the dispatch, not the relay"
    );
}

#[tokio::test]
async fn a_grouped_job_is_relayed_into_its_group_and_a_unique_one_too() {
    let (_postgres, redis, pool, queue) = setup().await;
    let plain = committed(&pool, Noop {}.dispatch().group("acme").via(&queue)).await;
    let unique = committed(
        &pool,
        Welcome { user: 1 }.dispatch().group("beta").via(&queue),
    )
    .await;
    Relay::new(pool.clone(), queue.clone())
        .relay_once()
        .await
        .unwrap();
    // Into each group's list, and each group into the queue's rotation (by its due set, which
    // the next pop reads); never into the list a Laravel worker reads. The queue drains only
    // if the pops find the groups.
    assert!(ready_uuids(&redis, "default").await.is_empty());
    for (group, uuid) in [("acme", plain), ("beta", unique)] {
        let key = format!("queues:default:g:{group}");
        let waiting: Vec<String> = redjob::redis::cmd("LRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .query_async(&mut redis.conn().await)
            .await
            .unwrap();
        let uuids: Vec<String> = waiting
            .iter()
            .map(|p| Payload::from_json(p).unwrap().uuid.to_string())
            .collect();
        assert_eq!(uuids, [uuid.to_string()], "{key}");
    }
    // `Welcome` is this test's own type, which the worker does not link: with no grace it
    // fails at once rather than wait for a worker that does (the drain is what is checked).
    let _worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "default", "--unknown-job-grace", "0"],
    );
    drained(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_wakes_on_the_commit_not_on_its_poll() {
    let (_postgres, redis, pool, queue) = setup().await;
    let relay = Relay::new(pool.clone(), queue.clone()).poll(Duration::from_secs(3600));
    let (stop, stopped) = stop_signal();
    let running = tokio::spawn(relay.run_until(stopped));
    // Wait until it listens: a row committed before would be found by its first pass anyway.
    // It listens before that pass, and writes its record after it.
    let admin = redjob::admin::Admin::new(queue.clone());
    wait_until(LONG, "the relay's first pass", || async {
        !admin.outbox_relays().await.unwrap().is_empty()
    })
    .await;

    let uuid = committed(&pool, Noop {}.dispatch().via(&queue)).await;
    let committed_at = std::time::Instant::now();
    wait_until(LONG, "the committed job reaches Redis", || async {
        ready_uuids(&redis, "default")
            .await
            .contains(&uuid.to_string())
    })
    .await;
    assert!(
        committed_at.elapsed() < Duration::from_secs(5),
        "{:?}",
        committed_at.elapsed()
    );

    stop.send(()).unwrap();
    running.await.unwrap();
}

#[tokio::test]
async fn unique_jobs_take_their_lock_at_relay_time_and_a_duplicate_is_kept_on_its_row() {
    let (_postgres, redis, pool, queue) = setup().await;
    let mut uuids = Vec::new();
    for _ in 0..2 {
        let uuid = committed(&pool, Welcome { user: 7 }.dispatch().via(&queue)).await;
        uuids.push(uuid.to_string());
    }
    save_rows(&pool).await;

    let relay = Relay::new(pool.clone(), queue.clone());
    assert_eq!(relay.relay_once().await.unwrap(), 2);
    assert_eq!(ready_uuids(&redis, "default").await, [uuids[0].clone()]);
    let left = kept_rows(&pool).await;
    assert_eq!(left.len(), 1, "the duplicate is kept: {left:?}");
    assert_eq!(left[0].0, uuids[1]);
    assert!(
        left[0].1.contains("duplicate") && left[0].1.contains(&uuids[0]),
        "{}",
        left[0].1
    );
    assert_eq!(
        relay.relay_once().await.unwrap(),
        0,
        "a kept row is not claimed again"
    );

    // The first row as a relay that died before its commit leaves it: pushed before, not a
    // duplicate of itself.
    put_back(&pool, &uuids[0]).await;
    assert_eq!(relay.relay_once().await.unwrap(), 1);
    assert_eq!(outbox_rows(&pool).await, 1, "only the duplicate is left");
    assert_eq!(ready_uuids(&redis, "default").await, [uuids[0].clone()]);

    // Once more after its guard has lapsed (deleted here): the lock it holds says it was
    // pushed.
    put_back(&pool, &uuids[0]).await;
    let guard = queue.keys().pushed("default", &uuids[0]);
    let mut conn = redis.conn().await;
    let deleted: u64 = redjob::redis::cmd("DEL")
        .arg(&guard)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1, "the guard {guard} was set");
    assert_eq!(relay.relay_once().await.unwrap(), 1);
    assert_eq!(
        outbox_rows(&pool).await,
        1,
        "not kept as a duplicate of itself"
    );
    assert_eq!(ready_uuids(&redis, "default").await, [uuids[0].clone()]);
}

#[tokio::test]
async fn debounced_jobs_are_refused_rather_than_pushed_outside_the_transaction() {
    let (_postgres, _redis, pool, queue) = setup().await;
    let mut tx = pool.begin().await.unwrap();
    let err = ReindexSearch {
        shop: 1,
        version: 1,
    }
    .dispatch()
    .via(&queue)
    .in_transaction(&mut tx)
    .await
    .unwrap_err();
    assert!(matches!(err, OutboxError::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("debounced"), "{err}");
    tx.commit().await.unwrap();
    assert_eq!(outbox_rows(&pool).await, 0);
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
    assert!(matches!(
        Outbox::table("bad name; DROP TABLE x"),
        Err(OutboxError::InvalidTable(_))
    ));
}

#[tokio::test]
async fn chains_and_batches_are_refused_and_write_nothing() {
    let (_postgres, _redis, pool, queue) = setup().await;
    let mut tx = pool.begin().await.unwrap();
    let chain = redjob::Chain::new(Noop {}.dispatch())
        .then(Noop {}.dispatch())
        .via(&queue);
    let err = chain.in_transaction(&mut tx).await.unwrap_err();
    assert!(
        matches!(err, OutboxError::Workflow { what: "a chain" }),
        "{err:?}"
    );
    let batch = redjob::Batch::new().job(Noop {}.dispatch()).via(&queue);
    let err = batch.in_transaction(&mut tx).await.unwrap_err();
    assert!(
        matches!(err, OutboxError::Workflow { what: "a batch" }),
        "{err:?}"
    );
    assert!(err.to_string().contains("after the commit"), "{err}");
    // The transaction goes on: what it wrote besides commits.
    written(&mut tx, Noop {}.dispatch().via(&queue)).await;
    tx.commit().await.unwrap();
    assert_eq!(outbox_rows(&pool).await, 1);
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_ten_thousand_dispatches_in_a_hundred_concurrent_transactions_exactly_the_committed_ones_run_once(
) {
    const TRANSACTIONS: usize = 100;
    const PER_TRANSACTION: usize = 100;
    let (_postgres, redis, pool, queue) = setup().await;
    // Two relays at once, claiming past each other's rows.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let relays: Vec<_> = (0..2)
        .map(|_| {
            let mut stopped = stopped.clone();
            let relay = Relay::new(pool.clone(), queue.clone()).batch(200);
            tokio::spawn(relay.run_until(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            }))
        })
        .collect();

    let writers: Vec<_> = (0..TRANSACTIONS)
        .map(|n| {
            let (pool, queue) = (pool.clone(), queue.clone());
            tokio::spawn(async move {
                let mut tx = pool.begin().await.unwrap();
                let mut uuids = Vec::with_capacity(PER_TRANSACTION);
                for _ in 0..PER_TRANSACTION {
                    let uuid = written(&mut tx, Record { due_ms: 0 }.dispatch().via(&queue)).await;
                    uuids.push(uuid.to_string());
                }
                // A third of them, spread through the run, roll back.
                if n % 3 == 1 {
                    tx.rollback().await.unwrap();
                    Vec::new()
                } else {
                    tx.commit().await.unwrap();
                    uuids
                }
            })
        })
        .collect();
    let mut committed = Vec::new();
    for writer in writers {
        committed.extend(writer.await.unwrap());
    }
    assert_eq!(committed.len(), 67 * PER_TRANSACTION);

    let worker = Worker::new(
        WorkerConfig {
            concurrency: 20,
            sleep: Duration::from_millis(50),
            ..WorkerConfig::default()
        },
        queue.clone(),
    )
    .unwrap();
    let stop_worker = worker.stop_token();
    let running = tokio::spawn(worker.run());
    let mut conn = redis.conn().await;
    wait_for_runs(&conn, committed.len(), LONG).await;
    // Nothing is pushed once the relays stop; a job pushed twice then waits or runs, and a
    // job records its run before it is acknowledged: with the queue empty, every run counts.
    stop.send(true).unwrap();
    for relay in relays {
        relay.await.unwrap();
    }
    drained(&queue).await;
    stop_worker.cancel();
    assert_eq!(running.await.unwrap().unwrap(), Exit::Stopped);

    let runs = runs_by_uuid(&mut conn).await;
    assert_eq!(
        runs.len(),
        committed.len(),
        "exactly the committed jobs ran"
    );
    for uuid in &committed {
        assert_eq!(runs.get(uuid).map(Vec::len), Some(1), "{uuid} ran once");
    }
    assert_eq!(outbox_rows(&pool).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaying_workers_killed_three_times_during_twenty_thousand_jobs_lose_none_and_push_none_twice(
) {
    const JOBS: usize = 20_000;
    const PER_TRANSACTION: usize = 50;
    let (postgres, redis, pool, queue) = setup().await;
    // Relaying workers take a queue nothing is pushed to: a kill hits only their relay. One
    // worker that is never killed runs the jobs.
    let relaying = || {
        WorkerProcess::start_with_env(
            env!("CARGO_BIN_EXE_test_worker"),
            redis.url(),
            &["--queue", "relay-only"],
            &[("TEST_OUTBOX_DATABASE_URL", &postgres.url())],
        )
    };
    let mut relay = relaying();
    let mut runner = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "default", "--concurrency", "20"],
    );

    let writer = {
        let (pool, queue) = (pool.clone(), queue.clone());
        tokio::spawn(async move {
            let mut written = Vec::with_capacity(JOBS);
            for _ in 0..JOBS / PER_TRANSACTION {
                let mut tx = pool.begin().await.unwrap();
                let mut bulk = Bulk::via(&queue);
                for _ in 0..PER_TRANSACTION {
                    bulk.add(Record { due_ms: 0 }.dispatch()).unwrap();
                }
                written.extend(bulk.in_transaction(&mut tx).await.unwrap());
                tx.commit().await.unwrap();
                // Spread the writes over a few seconds, so that the kills fall among them.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            written
        })
    };
    let mut conn = redis.conn().await;
    for _ in 1..=3 {
        let relayed = records_len(&mut conn).await;
        // Jobs are relayed before each kill.
        wait_for_runs(&conn, relayed + 201, LONG).await;
        relay.kill();
        relay = relaying();
    }
    let written = writer.await.unwrap();
    assert_eq!(written.len(), JOBS);
    wait_for_runs(&conn, JOBS, LONG).await;
    // Nothing is pushed once the relay stops; with the queue then empty, every run counts.
    relay.signal("TERM");
    assert_eq!(
        relay.wait_exit(LONG).await.code(),
        Some(0),
        "{:#?}",
        relay.lines()
    );
    drained(&queue).await;
    let runs = runs_by_uuid(&mut conn).await;
    assert_eq!(runs.len(), JOBS, "none lost");
    for uuid in &written {
        let ran = runs.get(&uuid.to_string()).map(Vec::len);
        assert_eq!(ran, Some(1), "{uuid} ran once");
    }
    assert_eq!(outbox_rows(&pool).await, 0);
    runner.signal("TERM");
    assert_eq!(runner.wait_exit(LONG).await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_dispatched_in_a_transaction_always_finds_the_row_it_was_committed_with() {
    const ORDERS: i64 = 200;
    let (_postgres, redis, pool, queue) = setup().await;
    sqlx::query("CREATE TABLE items (id bigint PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    let (stop, stopped) = stop_signal();
    let relay = tokio::spawn(Relay::new(pool.clone(), queue.clone()).run_until(stopped));
    let worker = Worker::new(
        WorkerConfig {
            concurrency: 10,
            sleep: Duration::from_millis(20),
            ..WorkerConfig::default()
        },
        queue.clone(),
    )
    .unwrap()
    .state(pool.clone());
    let stop_worker = worker.stop_token();
    let running = tokio::spawn(worker.run());

    for id in 1..=ORDERS {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("INSERT INTO items (id) VALUES ($1)")
            .bind(id)
            .execute(&mut *tx)
            .await
            .unwrap();
        written(&mut tx, FindRow { id }.dispatch().via(&queue)).await;
        // Time for a job pushed before the commit to run and miss its row.
        tokio::time::sleep(Duration::from_millis(5)).await;
        tx.commit().await.unwrap();
    }
    let finds: Vec<String> = wait_for(LONG, "every job looked for its row", || async {
        let finds: Vec<String> = redjob::redis::cmd("LRANGE")
            .arg("finds")
            .arg(0)
            .arg(-1)
            .query_async(&mut redis.conn().await)
            .await
            .unwrap();
        (finds.len() >= ORDERS as usize).then_some(finds)
    })
    .await;
    let missing: Vec<&String> = finds.iter().filter(|f| !f.ends_with(":found")).collect();
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(finds.len(), ORDERS as usize);

    stop_worker.cancel();
    running.await.unwrap().unwrap();
    stop.send(()).unwrap();
    relay.await.unwrap();
}

/// A stop signal for a relay: send to stop it.
fn stop_signal() -> (
    tokio::sync::oneshot::Sender<()>,
    impl std::future::Future<Output = ()>,
) {
    let (send, receive) = tokio::sync::oneshot::channel::<()>();
    (send, async move {
        let _ = receive.await;
    })
}

#[tokio::test]
async fn a_worker_given_a_relay_without_its_table_refuses_to_start() {
    let postgres = TestPostgres::start();
    let redis = TestRedis::start();
    let pool = PgPool::connect(&postgres.url()).await.unwrap();
    let queue = redis.queue();
    let worker = Worker::new(WorkerConfig::default(), queue.clone())
        .unwrap()
        .relay(Relay::new(pool, queue));
    let err = tokio::time::timeout(LONG, worker.run())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.exit_code(), redjob_worker::CONFIG_EXIT_CODE, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("redjob_outbox") && message.contains("Outbox::schema"),
        "{message}"
    );
}

/// The relay's start says what it relays and what wakes it, and its stop what it did: the
/// only lines of a relay that finds nothing wrong.
#[tokio::test]
async fn a_relay_logs_its_table_batch_and_wake_up_at_its_start_and_its_rows_at_its_stop() {
    let (postgres, redis, pool, queue) = setup().await;
    let mut worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "relay-only"],
        &[("TEST_OUTBOX_DATABASE_URL", &postgres.url())],
    );
    let line = |worker: &WorkerProcess, message: &str| {
        worker
            .lines()
            .iter()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|line| line["message"] == message)
    };
    let started = wait_for(LONG, "the relay logged its start", || {
        let started = line(&worker, "outbox relay started");
        async move { started }
    })
    .await;
    assert_eq!(started["table"], "redjob_outbox", "{started}");
    assert_eq!(started["batch"], 500, "{started}");
    assert_eq!(started["poll_ms"], 1000, "{started}");
    assert_eq!(started["listening"], true, "{started}");
    assert_eq!(
        started["woken"], "LISTEN redjob_outbox, and a poll every 1000 ms",
        "{started}"
    );

    committed(&pool, Noop {}.dispatch().via(&queue)).await;
    wait_until(LONG, "the job is relayed", || async {
        queue.size("default").await.unwrap().ready == 1
    })
    .await;
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(LONG).await.code(), Some(0));
    let stopped = line(&worker, "outbox relay stopped").expect("the relay logged its stop");
    assert_eq!(stopped["table"], "redjob_outbox", "{stopped}");
    assert_eq!(stopped["relayed"], 1, "{stopped}");
    assert_eq!(stopped["kept"], 0, "{stopped}");
}

/// An API and its workers starting together each call `create_table`: PostgreSQL's
/// `CREATE TABLE IF NOT EXISTS` alone lets several find no table, and all but one then fail
/// (`duplicate key value violates unique constraint "pg_type_typname_nsp_index"`, or the
/// relation already exists); without the lock, 7 of the 8 calls of the first round failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_called_by_many_processes_at_once_succeeds_in_each() {
    const CALLERS: usize = 8;
    const ROUNDS: usize = 5;
    let postgres = TestPostgres::start();
    // Connected before the start, so that the calls, not the connections, race.
    let mut conns = Vec::with_capacity(CALLERS);
    for _ in 0..CALLERS {
        conns.push(PgConnection::connect(&postgres.url()).await.unwrap());
    }
    for round in 0..ROUNDS {
        let outbox = Outbox::table(&format!("started_together_{round}")).unwrap();
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(CALLERS));
        let calls: Vec<_> = conns
            .drain(..)
            .map(|mut conn| {
                let (outbox, start) = (outbox.clone(), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    let created = outbox.create_table(&mut conn).await;
                    (conn, created)
                })
            })
            .collect();
        let mut failures = Vec::new();
        for call in calls {
            let (conn, created) = call.await.unwrap();
            if let Err(err) = created {
                failures.push(err.to_string());
            }
            conns.push(conn);
        }
        assert!(
            failures.is_empty(),
            "round {round}: {} of {CALLERS} calls failed: {failures:?}",
            failures.len()
        );
        let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {}",
            outbox.name()
        )))
        .fetch_one(&mut conns[0])
        .await
        .unwrap();
        assert_eq!(rows, 0, "round {round}: the table is there, empty");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_committed_row_arrives_once_across_restarts_of_postgres_and_redis() {
    const JOBS: usize = 1500;
    let mut postgres = TestPostgres::start();
    // Persisted at every write, so that what was pushed before the restart is still there.
    let mut redis = TestRedis::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let pool = PgPool::connect(&postgres.url()).await.unwrap();
    Outbox::default().create_table(&pool).await.unwrap();
    let queue = redis.queue();
    let (stop, stopped) = stop_signal();
    let relay = Relay::new(pool.clone(), queue.clone()).poll(Duration::from_millis(100));
    let relaying = tokio::spawn(relay.run_until(stopped));

    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (pool, queue, written) = (pool.clone(), queue.clone(), written.clone());
        tokio::spawn(async move {
            let mut uuids = Vec::with_capacity(JOBS);
            while uuids.len() < JOBS {
                // A transaction that fails (PostgreSQL restarting) is tried again, as an
                // application would; a rolled-back one made no job.
                let attempt = async {
                    let mut tx = pool.begin().await?;
                    let uuid = Noop {}
                        .dispatch()
                        .via(&queue)
                        .in_transaction(&mut tx)
                        .await
                        .map_err(|err| sqlx::Error::Protocol(err.to_string()))?;
                    tx.commit().await?;
                    Ok::<_, sqlx::Error>(uuid)
                };
                match attempt.await {
                    Ok(uuid) => {
                        uuids.push(uuid.to_string());
                        written.store(uuids.len(), std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            uuids
        })
    };
    let written_at_least = |n: usize| {
        let written = written.clone();
        async move { written.load(std::sync::atomic::Ordering::SeqCst) >= n }
    };
    wait_until(LONG, "300 jobs are written", || written_at_least(300)).await;
    tokio::task::block_in_place(|| postgres.restart());
    wait_until(LONG, "800 jobs are written", || written_at_least(800)).await;
    tokio::task::block_in_place(|| redis.restart());
    let uuids = writer.await.unwrap();

    wait_until(LONG, "every committed job reaches Redis", || async {
        queue
            .size("default")
            .await
            .is_ok_and(|size| size.ready >= JOBS as u64)
    })
    .await;
    let ready = ready_uuids(&redis, "default").await;
    let mut pushed: HashMap<&str, usize> = HashMap::new();
    for uuid in &ready {
        *pushed.entry(uuid.as_str()).or_default() += 1;
    }
    assert_eq!(ready.len(), JOBS, "none pushed twice");
    for uuid in &uuids {
        assert_eq!(pushed.get(uuid.as_str()), Some(&1), "{uuid} arrived once");
    }
    assert_eq!(outbox_rows(&pool).await, 0);
    stop.send(()).unwrap();
    relaying.await.unwrap();
}

#[tokio::test]
async fn a_row_redis_refuses_is_kept_with_the_reason_and_holds_back_no_other() {
    let (_postgres, redis, pool, queue) = setup().await;
    // A key of the wrong type where the job's queue should be.
    let _: () = redjob::redis::cmd("SET")
        .arg("queues:poisoned")
        .arg("not a list")
        .query_async(&mut redis.conn().await)
        .await
        .unwrap();
    let refused = committed(&pool, Noop {}.dispatch().on_queue("poisoned").via(&queue)).await;
    let fine = committed(&pool, Noop {}.dispatch().via(&queue)).await;

    let relay = Relay::new(pool.clone(), queue.clone());
    assert_eq!(relay.relay_once().await.unwrap(), 2);
    assert_eq!(ready_uuids(&redis, "default").await, [fine.to_string()]);
    let kept = kept_rows(&pool).await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].0, refused.to_string());
    assert!(kept[0].1.contains("WRONGTYPE"), "{}", kept[0].1);
    assert_eq!(
        relay.relay_once().await.unwrap(),
        0,
        "a kept row is not claimed again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_see_each_relay_and_its_table_in_jobsctl_the_dashboard_and_the_metrics() {
    let (postgres, redis, pool, queue) = setup().await;
    let admin = redjob::admin::Admin::new(queue.clone());
    // Two dispatches of one unique job: a relay pushes the first and keeps the second.
    for _ in 0..2 {
        committed(&pool, Welcome { user: 9 }.dispatch().via(&queue)).await;
    }
    let jobsctl = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());

    // No relay yet: Redis knows of none; the database shows the rows waiting for one.
    let ran = jobsctl.run(&["outbox"]);
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    assert!(ran.stdout.contains("No live outbox relays"), "{ran:?}");
    let ran = jobsctl.run(&["outbox", "--database", &postgres.url()]);
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    assert!(
        ran.stdout
            .contains("No live relay serves redjob_outbox: its rows wait"),
        "{}",
        ran.stdout
    );
    let shown = jobsctl.json(&["outbox", "--database", &postgres.url()]);
    let table = &shown["tables"][0];
    assert_eq!(table["table"], "redjob_outbox", "{shown}");
    assert_eq!(table["relays"], 0);
    assert_eq!(table["measured_by"], "database");
    assert_eq!(table["status"]["waiting"], 2);
    assert_eq!(table["status"]["kept"], 0);

    // A relaying worker with metrics: its record, its table's figures, its gauges.
    let metrics = format!("127.0.0.1:{}", tests::free_port());
    let mut worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "relay-only", "--metrics-addr", &metrics],
        &[("TEST_OUTBOX_DATABASE_URL", &postgres.url())],
    );
    let relay = wait_for(LONG, "the relay's record after its first pass", || async {
        let relays = admin.outbox_relays().await.unwrap();
        relays.into_iter().find(|r| r.relayed + r.kept == 2)
    })
    .await;
    assert_eq!(relay.table, "redjob_outbox");
    assert_eq!(relay.pid, worker.pid());
    assert_eq!((relay.relayed, relay.kept), (1, 1));
    let status = relay.outbox.expect("the relay measured its table");
    assert_eq!((status.waiting, status.kept), (0, 1));
    assert_eq!(status.lag(), Duration::ZERO);

    let shown = jobsctl.json(&["outbox"]);
    assert_eq!(shown["tables"][0]["relays"], 1, "{shown}");
    assert_eq!(shown["tables"][0]["measured_by"], "relay");
    assert_eq!(shown["tables"][0]["status"]["kept"], 1);
    assert_eq!(shown["relays"][0]["pid"], worker.pid());
    let ran = jobsctl.run(&["outbox"]);
    let human: Vec<&str> = ran.stdout.lines().collect();
    assert!(human[0].starts_with("TABLE"), "{}", ran.stdout);
    assert!(
        human[1].split_whitespace().collect::<Vec<_>>()[..5]
            == ["redjob_outbox", "1", "0", "1", "0.0s"],
        "{}",
        ran.stdout
    );

    let dashboard =
        tests::dashboard::Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);
    let listed = dashboard.get_json("/api/outbox");
    assert_eq!(listed[0]["table"], "redjob_outbox", "{listed}");
    assert_eq!(listed[0]["relays"], 1);
    assert_eq!(listed[0]["status"]["waiting"], 0);
    assert_eq!(listed[0]["status"]["kept"], 1);

    let gauge = |series: &str| tests::http::scraped(&metrics, series);
    wait_until(LONG, "the outbox gauges", || {
        let relays = gauge(r#"jobs_outbox_relays{table="redjob_outbox"}"#);
        async move { relays == Some(1.0) }
    })
    .await;
    assert_eq!(
        gauge(r#"jobs_outbox_rows{table="redjob_outbox",state="kept"}"#),
        Some(1.0)
    );
    assert_eq!(
        gauge(r#"jobs_outbox_rows{table="redjob_outbox",state="waiting"}"#),
        Some(0.0)
    );
    assert_eq!(
        gauge(r#"jobs_outbox_lag_seconds{table="redjob_outbox"}"#),
        Some(0.0)
    );

    // A stopped relay removes its record.
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(LONG).await.code(), Some(0));
    assert!(admin.outbox_relays().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_lag_is_the_oldest_waiting_rows_age_and_a_dead_relay_is_dropped() {
    let (_postgres, redis, pool, queue) = setup().await;
    committed(&pool, Noop {}.dispatch().via(&queue)).await;
    sqlx::query("UPDATE redjob_outbox SET created_at = now() - interval '90 seconds'")
        .execute(&pool)
        .await
        .unwrap();
    committed(&pool, Noop {}.dispatch().via(&queue)).await;
    let status = Outbox::default().status(&pool).await.unwrap();
    assert_eq!((status.waiting, status.kept), (2, 0));
    let lag = status.lag().as_secs_f64();
    assert!((89.0..120.0).contains(&lag), "lag {lag} s");

    // A relay killed with SIGKILL: its record has expired, its id is still listed in the
    // index. It is not listed as live, and its id is removed.
    let index = queue.keys().outbox_relays();
    let mut conn = redis.conn().await;
    let _: () = redjob::redis::cmd("ZADD")
        .arg(&index)
        .arg(chrono::Utc::now().timestamp() - 60)
        .arg("dead")
        .query_async(&mut conn)
        .await
        .unwrap();
    let admin = redjob::admin::Admin::new(queue.clone());
    assert!(admin.outbox_relays().await.unwrap().is_empty());
    let left: u64 = redjob::redis::cmd("ZCARD")
        .arg(&index)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "the dead relay's record is removed");
}
