//! A service's path through a transaction: the fake queue sees dispatches made in a
//! transaction exactly when they commit, and lets none reach an outbox table; a tracked job
//! relayed from the outbox has its status from its push, and a typed handle rebuilt from its
//! uuid waits for its output. Real PostgreSQL and Redis servers, each a private one.

use std::time::Duration;

use examples::{Noop, Sum};
use redjob::outbox::{Outbox, OutboxError, Relay};
use redjob::status::{Cancelled, JobState, Tracked};
use redjob::testing::{self, Fake};
use redjob::{Bulk, Job, PendingDispatch, RedisQueue};
use sqlx::{Acquire, PgConnection, PgPool};
use tests::cluster::TestCluster;
use tests::worker_process::WorkerProcess;
use tests::{outbox_rows, TestPostgres, TestRedis};

const LONG: Duration = Duration::from_secs(30);

async fn database() -> (TestPostgres, PgPool) {
    let postgres = TestPostgres::start();
    let pool = PgPool::connect(&postgres.url()).await.unwrap();
    Outbox::default().create_table(&pool).await.unwrap();
    (postgres, pool)
}

/// The tables of the database's own schemas: a fake's dispatches add none.
async fn tables(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables \
         WHERE schemaname NOT IN ('pg_catalog', 'information_schema') \
         AND schemaname NOT LIKE 'pg_temp%' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

fn sum(numbers: &[u64]) -> Sum {
    Sum {
        numbers: numbers.to_vec(),
        step_ms: 0,
        fail: None,
    }
}

#[tokio::test]
async fn the_fake_records_a_dispatch_in_a_transaction_when_it_commits_and_never_when_it_rolls_back()
{
    let (_postgres, pool) = database().await;
    let fake = testing::fake();

    // Before the fake can see transactions end, it refuses, and nothing is written.
    let mut tx = pool.begin().await.unwrap();
    let refused = Noop {}.dispatch().in_transaction(&mut tx).await;
    assert!(
        matches!(refused, Err(OutboxError::FakeWithoutDatabase)),
        "{refused:?}"
    );
    tx.commit().await.unwrap();
    fake.transactions_in(&pool);

    // Committed: held by its transaction until then, recorded from then on.
    let mut tx = pool.begin().await.unwrap();
    let committed = sum(&[1, 2])
        .dispatch()
        .delay(30)
        .in_transaction(&mut tx)
        .await
        .unwrap();
    fake.assert_transaction_holds::<Sum>(&mut tx).await;
    assert_eq!(fake.transaction_holds(&mut tx).await.len(), 1);
    fake.assert_nothing_pushed();
    assert_eq!(fake.unsettled(), 1);
    tx.commit().await.unwrap();
    fake.assert_pushed_times::<Sum>(1);
    fake.assert_pushed_with_delay::<Sum>(30);
    fake.assert_pushed_with::<Sum>(|job| job.numbers == [1, 2]);
    assert_eq!(fake.pushed()[0].uuid, committed);
    assert_eq!(fake.unsettled(), 0);

    // Rolled back: never recorded.
    let mut tx = pool.begin().await.unwrap();
    Noop {}.dispatch().in_transaction(&mut tx).await.unwrap();
    tx.rollback().await.unwrap();
    // Dropped without a commit, which rolls back.
    let mut tx = pool.begin().await.unwrap();
    Noop {}.dispatch().in_transaction(&mut tx).await.unwrap();
    drop(tx);
    // A savepoint rolled back inside a transaction that commits: only the outer jobs count,
    // and a bulk through the fake's handle, a tracked dispatch and a plain connection too.
    let mut tx = pool.begin().await.unwrap();
    let mut savepoint = tx.begin().await.unwrap();
    Noop {}
        .dispatch()
        .in_transaction(&mut savepoint)
        .await
        .unwrap();
    savepoint.rollback().await.unwrap();
    let mut released = tx.begin().await.unwrap();
    let in_released = Noop {}
        .dispatch()
        .in_transaction(&mut released)
        .await
        .unwrap();
    released.commit().await.unwrap();
    let mut bulk = Bulk::via(&fake.handle());
    bulk.add(Noop {}.dispatch().on_queue("other")).unwrap();
    bulk.add(Noop {}.dispatch()).unwrap();
    let bulked = bulk.in_transaction(&mut tx).await.unwrap();
    let tracked = sum(&[3])
        .dispatch()
        .track()
        .in_transaction(&mut tx)
        .await
        .unwrap();
    let held: Vec<_> = fake
        .transaction_holds(&mut tx)
        .await
        .iter()
        .map(|job| job.uuid)
        .collect();
    assert_eq!(held, [in_released, bulked[0], bulked[1], tracked.uuid()]);
    fake.assert_pushed_times::<Noop>(0);
    tx.commit().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let on_connection = Noop {}.dispatch().in_transaction(&mut conn).await.unwrap();

    let noops: Vec<_> = fake
        .pushed_of::<Noop>()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let uuids: Vec<_> = noops.iter().map(|record| record.uuid).collect();
    assert_eq!(uuids, [in_released, bulked[0], bulked[1], on_connection]);
    assert_eq!(noops[1].queue, "other");
    fake.assert_pushed_times::<Sum>(2);
    assert!(fake.pushed().iter().any(|job| job.uuid == tracked.uuid()));

    // Nothing reached a table a relay could move, and no table was added.
    assert_eq!(outbox_rows(&pool).await, 0);
    assert_eq!(tables(&pool).await, ["redjob_outbox"]);
}

#[tokio::test]
async fn a_fake_of_its_own_handle_keeps_its_transactions_apart_from_the_installed_one() {
    let (_postgres, pool) = database().await;
    let installed = testing::fake();
    let own = Fake::new();
    own.transactions_in(&pool);

    let mut tx = pool.begin().await.unwrap();
    let refused = Noop {}.dispatch().in_transaction(&mut tx).await;
    assert!(
        matches!(refused, Err(OutboxError::FakeWithoutDatabase)),
        "the installed fake was not given the database: {refused:?}"
    );
    Noop {}
        .dispatch()
        .via(&own.handle())
        .in_transaction(&mut tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    own.assert_pushed_times::<Noop>(1);
    installed.assert_nothing_pushed();
    assert_eq!(outbox_rows(&pool).await, 0);
}

/// Writes `dispatch`, tracked, in the transaction `tx`; its typed handle.
async fn tracked_in(tx: &mut PgConnection, dispatch: PendingDispatch<Sum>) -> Tracked<Sum> {
    dispatch.track().in_transaction(tx).await.unwrap()
}

/// Commits a tracked `Sum` in the outbox, relays it, and checks what its status says before a
/// worker takes it: `queued`, or `delayed` for one due later.
async fn relay_tracked(pool: &PgPool, queue: &RedisQueue) -> [uuid::Uuid; 3] {
    let mut tx = pool.begin().await.unwrap();
    let ready = tracked_in(&mut tx, sum(&[1, 2, 3]).dispatch().via(queue)).await;
    let delayed = tracked_in(&mut tx, sum(&[4]).dispatch().via(queue).delay(600)).await;
    let to_cancel = tracked_in(&mut tx, sum(&[5]).dispatch().via(queue)).await;
    // An untracked job beside them keeps no record.
    let untracked = Noop {}
        .dispatch()
        .via(queue)
        .in_transaction(&mut tx)
        .await
        .unwrap();
    assert_eq!(
        ready.status().await.unwrap().state,
        JobState::Unknown,
        "nothing in Redis before the commit and the relay"
    );
    tx.commit().await.unwrap();

    let relay = Relay::new(pool.clone(), queue.clone());
    assert_eq!(relay.relay_once().await.unwrap(), 4);
    let status = ready.status().await.unwrap();
    assert_eq!(status.state, JobState::Queued, "{status:?}");
    assert_eq!(status.queue.as_deref(), Some("default"), "{status:?}");
    assert_eq!(status.job.as_deref(), Some(Sum::NAME), "{status:?}");
    assert_eq!(delayed.status().await.unwrap().state, JobState::Delayed);
    assert_eq!(
        queue.status(untracked).await.unwrap().state,
        JobState::Unknown
    );
    assert!(
        matches!(
            to_cancel.cancel().await.unwrap(),
            Cancelled::Waiting(JobState::Queued)
        ),
        "a relayed tracked job cancels as a queued one"
    );
    [ready.uuid(), delayed.uuid(), to_cancel.uuid()]
}

#[tokio::test]
async fn a_relayed_tracked_job_is_queued_from_its_push_and_a_handle_from_its_uuid_waits_for_its_output(
) {
    let (_postgres, pool) = database().await;
    let redis = TestRedis::start();
    let queue = redis.queue();
    let [ready, delayed, cancelled] = relay_tracked(&pool, &queue).await;

    let _worker = WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis.url(), &[]);
    // A later request has only the uuid: the typed handle waits for the typed output.
    let total: u64 = queue.tracked::<Sum>(ready).wait(LONG).await.unwrap();
    assert_eq!(total, 6);
    let ended = queue.tracked::<Sum>(cancelled).wait(LONG).await;
    assert!(
        matches!(ended, Err(redjob::status::WaitError::Cancelled)),
        "{ended:?}"
    );
    assert_eq!(
        queue.status(delayed).await.unwrap().state,
        JobState::Delayed
    );
}

#[tokio::test]
async fn on_a_cluster_a_relayed_tracked_job_is_queued_from_its_push() {
    let (_postgres, pool) = database().await;
    let cluster = TestCluster::start();
    let queue = cluster.queue();
    relay_tracked(&pool, &queue).await;
}
