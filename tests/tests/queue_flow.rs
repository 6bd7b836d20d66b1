//! The queue flow of `RedisQueue`, without a worker, against a real redis-server: each test
//! starts its own server and checks the exact Redis state Laravel's flow leaves behind.

use redjob::__worker::{ExtendArgs, WorkerQueue};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tests::protocol::WorkerCalls;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redjob::queue::keys::{KeyLayout, QueueKeys};
use redjob::queue::Envelope;
use redjob::{
    job, Bulk, Error, FailedJob, Job, JobContext, JobResult, QueueConfig, QueueSize, RedisQueue,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tests::{json_fields, wait_until, SentVia, TestRedis};

type Conn = MultiplexedConnection;

const RETRY_AFTER: Duration = Duration::from_secs(90);
const MIGRATE_ALL: usize = 1_000_000;
/// Tolerance when comparing a score with "server time + x".
const CLOCK_SLACK: f64 = 2.0;

#[derive(Serialize, Deserialize)]
struct Invoice {
    id: u64,
}

#[job(queue = "billing", tries = 3, backoff = [1, 5, 10], timeout = 30)]
impl Job for Invoice {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct Numbered {
    n: u64,
}

#[job]
impl Job for Numbered {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// helpers

async fn lrange(conn: &mut Conn, key: &str) -> Vec<String> {
    conn.lrange(key, 0, -1).await.expect("LRANGE")
}

/// The fields of the one payload on the list `key`, in their order.
async fn the_one_payload(conn: &mut Conn, key: &str) -> Vec<(String, Value)> {
    let ready = lrange(conn, key).await;
    assert_eq!(ready.len(), 1, "one payload on {key}: {ready:?}");
    json_fields(&ready[0])
}

fn field_names(fields: &[(String, Value)]) -> Vec<&str> {
    fields.iter().map(|(name, _)| name.as_str()).collect()
}

async fn llen(conn: &mut Conn, key: &str) -> u64 {
    conn.llen(key).await.expect("LLEN")
}

async fn zrange(conn: &mut Conn, key: &str) -> Vec<(String, f64)> {
    conn.zrange_withscores(key, 0, -1).await.expect("ZRANGE")
}

async fn exists(conn: &mut Conn, key: &str) -> bool {
    conn.exists(key).await.expect("EXISTS")
}

/// Adds `members` to a sorted set, in chunks.
async fn zadd_all(conn: &mut Conn, key: &str, members: &[(f64, String)]) {
    for chunk in members.chunks(10_000) {
        let _: u64 = conn.zadd_multiple(key, chunk).await.expect("ZADD");
    }
}

/// Every key a queue and the failed-job store consist of, with its full content.
async fn snapshot(conn: &mut Conn, keys: &QueueKeys) -> Vec<String> {
    vec![
        format!("ready {:?}", lrange(conn, &keys.ready).await),
        format!("delayed {:?}", zrange(conn, &keys.delayed).await),
        format!("reserved {:?}", zrange(conn, &keys.reserved).await),
        format!("notify {:?}", lrange(conn, &keys.notify).await),
        format!(
            "failed {:?}",
            conn.hgetall::<_, HashMap<String, String>>(KeyLayout::Standalone.failed_jobs())
                .await
                .expect("HGETALL")
        ),
        format!(
            "failed index {:?}",
            zrange(conn, KeyLayout::Standalone.failed_jobs_index()).await
        ),
    ]
}

/// `payload` with its top-level `attempts` (the last one in the text) set to `attempts`.
fn with_attempts(payload: &str, attempts: u32) -> String {
    let start = payload
        .rfind("\"attempts\":")
        .unwrap_or_else(|| panic!("no attempts field in {payload}"))
        + "\"attempts\":".len();
    let end = start
        + payload[start..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(payload.len() - start);
    format!("{}{attempts}{}", &payload[..start], &payload[end..])
}

fn field(json: &str, name: &str) -> Value {
    let value: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    value[name].clone()
}

/// Reserves the next job of `keys` for 50 ms and waits, by the server's clock, until that
/// reservation has expired; returns the reserved copy.
async fn reserve_until_expired(redis: &TestRedis, queue: &RedisQueue, keys: &QueueKeys) -> String {
    let reserved = queue
        .pop(keys, Duration::from_millis(50), 1, MIGRATE_ALL)
        .await
        .unwrap()
        .jobs
        .remove(0);
    let mut conn = redis.conn().await;
    let expiry = zrange(&mut conn, &keys.reserved).await[0].1;
    wait_until(
        Duration::from_secs(10),
        "the reservation expired",
        || async move { redis.server_time().await > expiry + 0.01 },
    )
    .await;
    reserved
}

/// The `data.n` of every payload in a list, in order.
async fn numbers_in(conn: &mut Conn, key: &str) -> Vec<u64> {
    lrange(conn, key).await.iter().map(|p| data_n(p)).collect()
}

fn data_n(payload: &str) -> u64 {
    field(payload, "data")["n"]
        .as_u64()
        .unwrap_or_else(|| panic!("no data.n in {payload}"))
}

fn assert_close(actual: f64, expected: f64, slack: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= slack,
        "{what}: {actual} is not within {slack} of {expected}"
    );
}

/// A minimal payload carrying its number in `data.n`, for tests that fill Redis directly.
fn raw_payload(n: u64) -> String {
    format!(r#"{{"uuid":"u{n}","job":"Numbered","data":{{"n":{n}}},"attempts":0,"delay":null}}"#)
}

/// Pushes a raw payload onto queue `q` with its wake-up token, as a dispatch would.
async fn push_raw(conn: &mut Conn, payload: &str) {
    let _: () = redis::pipe()
        .rpush("queues:q", payload)
        .rpush("queues:q:notify", "1")
        .query_async(conn)
        .await
        .unwrap();
}

async fn pop(queue: &redjob::RedisQueue, keys: &QueueKeys) -> redjob::queue::Popped {
    queue
        .pop(keys, RETRY_AFTER, 1, MIGRATE_ALL)
        .await
        .expect("pop")
}

// ---------------------------------------------------------------------------------------
// payload

#[tokio::test]
async fn payload_has_laravel_fields_in_order() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;

    let uuid = Invoice { id: 7 }.dispatch().sent_via(&queue).await;
    let now = redis.server_time().await;

    let fields = the_one_payload(&mut conn, "queues:billing").await;
    assert_eq!(
        field_names(&fields),
        [
            "uuid",
            "displayName",
            "job",
            "maxTries",
            "backoff",
            "timeout",
            "data",
            "createdAt",
            "id",
            "attempts"
        ]
    );
    let fields: HashMap<String, Value> = fields.into_iter().collect();
    assert_eq!(fields["uuid"], json!(uuid.to_string()));
    assert_eq!(fields["displayName"], json!("Invoice"));
    assert_eq!(fields["job"], json!("Invoice"));
    assert_eq!(fields["maxTries"], json!(3));
    assert_eq!(fields["backoff"], json!("1,5,10"));
    assert_eq!(fields["timeout"], json!(30));
    assert_eq!(fields["data"], json!({"id": 7}));
    assert_close(
        fields["createdAt"].as_f64().expect("createdAt is a number"),
        now,
        CLOCK_SLACK,
        "createdAt",
    );
    assert_eq!(fields["id"], json!(uuid.simple().to_string()));
    assert_eq!(fields["attempts"], json!(0));
    assert_eq!(llen(&mut conn, "queues:billing:notify").await, 1);

    // A job without options: every option left out (Laravel reads each with `?? null`), on
    // the default queue.
    Numbered { n: 1 }.dispatch().sent_via(&queue).await;
    let fields = the_one_payload(&mut conn, "queues:default").await;
    assert_eq!(
        field_names(&fields),
        [
            "uuid",
            "displayName",
            "job",
            "data",
            "createdAt",
            "id",
            "attempts"
        ],
        "the fields of an option-less job"
    );
    let fields: HashMap<String, Value> = fields.into_iter().collect();
    assert_eq!(fields["job"], json!("Numbered"));

    // Dispatch-time options win over the job's; delays are recorded in seconds.
    Invoice { id: 8 }
        .dispatch()
        .on_queue("other")
        .tries(5)
        .backoff(vec![2, 4])
        .timeout(9)
        .delay(30)
        .sent_via(&queue)
        .await;
    Invoice { id: 9 }
        .dispatch()
        .on_queue("other")
        .delay(Duration::from_millis(1500))
        .sent_via(&queue)
        .await;
    let delayed = zrange(&mut conn, "queues:other:delayed").await;
    assert_eq!(delayed.len(), 2, "two delayed payloads: {delayed:?}");
    let (first, second) = (&delayed[1].0, &delayed[0].0);
    assert_eq!(field(first, "data"), json!({"id": 8}));
    assert_eq!(field(first, "maxTries"), json!(5));
    assert_eq!(field(first, "backoff"), json!("2,4"));
    assert_eq!(field(first, "timeout"), json!(9));
    assert_eq!(field(first, "delay"), json!(30));
    assert_eq!(field(first, "attempts"), json!(0));
    assert_eq!(field(second, "data"), json!({"id": 9}));
    assert_eq!(field(second, "delay"), json!(1.5));
    assert!(!exists(&mut conn, "queues:other").await, "nothing is ready");
}

// ---------------------------------------------------------------------------------------
// push, pop, delete, release

#[tokio::test]
async fn push_pop_delete_leaves_laravel_state() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    let ready = lrange(&mut conn, "queues:q").await;
    assert_eq!(ready.len(), 1);
    let payload = ready[0].clone();
    assert_eq!(lrange(&mut conn, "queues:q:notify").await.len(), 1);
    assert!(zrange(&mut conn, "queues:q:reserved").await.is_empty());
    assert!(zrange(&mut conn, "queues:q:delayed").await.is_empty());

    let popped = pop(&queue, &keys).await;
    let now = redis.server_time().await;
    assert_eq!(popped.jobs.len(), 1);
    let reserved_copy = &popped.jobs[0];
    assert_eq!(*reserved_copy, with_attempts(&payload, 1));
    assert_eq!(field(reserved_copy, "attempts"), json!(1));
    assert_eq!(llen(&mut conn, "queues:q").await, 0, "ready list empty");
    assert_eq!(llen(&mut conn, "queues:q:notify").await, 0, "notify empty");
    let reserved = zrange(&mut conn, "queues:q:reserved").await;
    assert_eq!(reserved.len(), 1);
    assert_eq!(&reserved[0].0, reserved_copy);
    assert_close(
        reserved[0].1,
        now + RETRY_AFTER.as_secs_f64(),
        CLOCK_SLACK,
        "reservation expiry",
    );
    assert_close(
        popped
            .next_due
            .expect("the reservation is due later")
            .as_secs_f64(),
        RETRY_AFTER.as_secs_f64(),
        CLOCK_SLACK,
        "next_due is the reservation's expiry",
    );

    assert!(queue.delete(&keys, reserved_copy).await.unwrap());
    for key in [&keys.ready, &keys.delayed, &keys.reserved, &keys.notify] {
        assert!(!exists(&mut conn, key).await, "{key} is gone after delete");
    }
    let popped = pop(&queue, &keys).await;
    assert!(popped.jobs.is_empty());
    assert_eq!(popped.next_due, None);
}

#[tokio::test]
async fn due_delayed_jobs_pop_in_due_order() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    for (n, ms) in [(3, 600), (1, 200), (2, 400)] {
        Numbered { n }
            .dispatch()
            .on_queue("q")
            .delay(Duration::from_millis(ms))
            .sent_via(&queue)
            .await;
    }
    assert_eq!(llen(&mut conn, "queues:q").await, 0, "nothing ready yet");
    let delayed = zrange(&mut conn, "queues:q:delayed").await;
    let order: Vec<u64> = delayed.iter().map(|(p, _)| data_n(p)).collect();
    assert_eq!(order, [1, 2, 3], "delayed set in due order");
    let last_due = delayed[2].1;

    wait_until(
        Duration::from_secs(10),
        "the last delayed job is due",
        || {
            let redis = &redis;
            async move { redis.server_time().await > last_due + 0.01 }
        },
    )
    .await;

    let mut popped = Vec::new();
    for _ in 0..3 {
        let jobs = pop(&queue, &keys).await.jobs;
        assert_eq!(jobs.len(), 1, "one job per pop");
        assert_eq!(field(&jobs[0], "attempts"), json!(1));
        popped.push(data_n(&jobs[0]));
    }
    assert_eq!(popped, [1, 2, 3]);
    assert!(pop(&queue, &keys).await.jobs.is_empty());
    assert_eq!(llen(&mut conn, "queues:q:notify").await, 0);
    assert!(zrange(&mut conn, "queues:q:delayed").await.is_empty());
}

#[tokio::test]
async fn release_goes_through_delayed_with_its_attempts() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    let reserved_copy = pop(&queue, &keys).await.jobs.remove(0);

    assert!(queue
        .release(&keys, &reserved_copy, Duration::from_secs(1000))
        .await
        .unwrap());
    let now = redis.server_time().await;
    assert!(zrange(&mut conn, "queues:q:reserved").await.is_empty());
    assert_eq!(llen(&mut conn, "queues:q").await, 0);
    let delayed = zrange(&mut conn, "queues:q:delayed").await;
    assert_eq!(delayed.len(), 1, "exactly one delayed entry: {delayed:?}");
    assert_eq!(delayed[0].0, reserved_copy, "released as reserved");
    assert_eq!(field(&delayed[0].0, "attempts"), json!(1));
    assert_close(delayed[0].1, now + 1000.0, CLOCK_SLACK, "release due time");

    // Not due: a pop gets nothing and reports the due time.
    let popped = pop(&queue, &keys).await;
    assert!(popped.jobs.is_empty());
    assert_close(
        popped.next_due.expect("a delayed job").as_secs_f64(),
        1000.0,
        CLOCK_SLACK,
        "next_due of the released job",
    );
    assert_eq!(
        llen(&mut conn, "queues:q:notify").await,
        0,
        "no ready job, no token"
    );

    // Released with no delay: poppable at once, with attempts 2.
    Numbered { n: 2 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    let second = pop(&queue, &keys).await.jobs.remove(0);
    assert_eq!(data_n(&second), 2);
    assert!(queue.release(&keys, &second, Duration::ZERO).await.unwrap());
    let delayed = zrange(&mut conn, "queues:q:delayed").await;
    assert_eq!(delayed.len(), 2);
    assert_eq!(delayed[0].0, second, "the immediate release is first due");
    let popped = pop(&queue, &keys).await;
    assert_eq!(popped.jobs, [with_attempts(&second, 2)]);
    let reserved = zrange(&mut conn, "queues:q:reserved").await;
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].0, with_attempts(&second, 2));
    let delayed = zrange(&mut conn, "queues:q:delayed").await;
    assert_eq!(delayed.len(), 1, "the 1000 s release is still waiting");
    assert_eq!(delayed[0].0, reserved_copy);
}

#[tokio::test]
async fn pop_reports_next_due() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    let popped = pop(&queue, &keys).await;
    assert!(popped.jobs.is_empty());
    assert_eq!(popped.next_due, None, "nothing delayed or reserved");

    for (n, seconds) in [(1, 60), (2, 30)] {
        Numbered { n }
            .dispatch()
            .on_queue("q")
            .delay(seconds)
            .sent_via(&queue)
            .await;
    }
    let earliest = zrange(&mut conn, "queues:q:delayed").await[0].1;
    let popped = pop(&queue, &keys).await;
    let now = redis.server_time().await;
    assert!(popped.jobs.is_empty());
    let next_due = popped.next_due.expect("delayed jobs").as_secs_f64();
    assert_close(next_due, earliest - now, CLOCK_SLACK, "next_due");
    assert!(
        next_due <= 30.0 && next_due > 30.0 - CLOCK_SLACK,
        "next_due {next_due} s for a job delayed 30 s"
    );

    // A reservation that expires earlier than any delayed job sets next_due.
    Numbered { n: 3 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    let popped = queue
        .pop(&keys, Duration::from_secs(10), 1, MIGRATE_ALL)
        .await
        .unwrap();
    assert_eq!(popped.jobs.len(), 1);
    assert_close(
        popped.next_due.expect("a reservation").as_secs_f64(),
        10.0,
        CLOCK_SLACK,
        "next_due of a 10 s reservation",
    );
}

#[tokio::test]
async fn pop_reports_next_due_after_migrating_and_beside_earlier_reservations() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");
    let secs = Duration::from_secs;
    let next_due = |popped: &redjob::queue::Popped| {
        popped
            .next_due
            .expect("something is delayed or reserved")
            .as_secs_f64()
    };

    // The migration moves the due job and leaves the later one, which is the next due.
    let now = redis.server_time().await;
    zadd_all(
        &mut conn,
        &keys.delayed,
        &[(now - 1.0, raw_payload(1)), (now + 20.0, raw_payload(2))],
    )
    .await;
    let popped = queue.pop(&keys, secs(60), 5, MIGRATE_ALL).await.unwrap();
    assert_eq!(
        popped.jobs.iter().map(|j| data_n(j)).collect::<Vec<_>>(),
        [1]
    );
    assert_close(next_due(&popped), 20.0, CLOCK_SLACK, "the delayed job left");

    // A reservation made now that expires first is the next due...
    push_raw(&mut conn, &raw_payload(3)).await;
    let popped = queue.pop(&keys, secs(5), 1, MIGRATE_ALL).await.unwrap();
    assert_eq!(popped.jobs.len(), 1);
    assert_close(next_due(&popped), 5.0, CLOCK_SLACK, "a 5 s reservation");
    // ... and stays so beside a later one, and for a pop that reserves nothing.
    push_raw(&mut conn, &raw_payload(4)).await;
    let popped = queue.pop(&keys, secs(60), 1, MIGRATE_ALL).await.unwrap();
    assert_eq!(popped.jobs.len(), 1);
    assert_close(
        next_due(&popped),
        5.0,
        CLOCK_SLACK,
        "the earlier reservation",
    );
    let popped = queue.pop(&keys, secs(60), 1, MIGRATE_ALL).await.unwrap();
    assert!(popped.jobs.is_empty());
    assert_close(
        next_due(&popped),
        5.0,
        CLOCK_SLACK,
        "the earliest reservation",
    );
    assert!(
        !exists(&mut conn, &keys.notify).await,
        "no token for no job"
    );

    // Tokens follow the ready jobs left: trimmed when there are more, added when fewer.
    for n in [5, 6] {
        push_raw(&mut conn, &raw_payload(n)).await;
    }
    let _: () = conn.rpush(&keys.notify, &["1", "1", "1"]).await.unwrap();
    queue.pop(&keys, secs(60), 1, MIGRATE_ALL).await.unwrap();
    assert_eq!(
        llen(&mut conn, &keys.notify).await,
        1,
        "one job left, one token"
    );
    let _: () = conn
        .rpush(&keys.ready, &[raw_payload(7), raw_payload(8)])
        .await
        .unwrap();
    queue.pop(&keys, secs(60), 1, MIGRATE_ALL).await.unwrap();
    assert_eq!(
        llen(&mut conn, &keys.notify).await,
        2,
        "two jobs left, two tokens"
    );
    queue.pop(&keys, secs(60), 5, MIGRATE_ALL).await.unwrap();
    assert!(
        !exists(&mut conn, &keys.notify).await,
        "none left, no token"
    );
}

#[tokio::test]
async fn pop_measures_the_time_until_the_next_due_to_the_microsecond() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");
    // Delayed jobs are taken once the clock, in whole milliseconds, reaches their score: the
    // time until then is measured from the clock to the microsecond (from its whole
    // milliseconds it would be up to a millisecond too long), to the first whole millisecond
    // at or after the score.
    let whole_ms = ((redis.server_time().await + 10.0) * 1000.0).floor() / 1000.0;
    for (score, taken_at) in [(whole_ms, whole_ms), (whole_ms + 0.0003, whole_ms + 0.001)] {
        let _: () = conn.del(&keys.delayed).await.unwrap();
        zadd_all(&mut conn, &keys.delayed, &[(score, raw_payload(1))]).await;
        for _ in 0..10 {
            let before = redis.server_time().await;
            let popped = queue.pop(&keys, RETRY_AFTER, 1, MIGRATE_ALL).await.unwrap();
            let after = redis.server_time().await;
            assert!(popped.jobs.is_empty());
            let next_due = popped.next_due.expect("a delayed job").as_secs_f64();
            assert!(
                taken_at - after - 2e-6 <= next_due && next_due <= taken_at - before + 2e-6,
                "next_due {next_due} s for a job of score {score}, popped between {before} and \
                 {after}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// migration at scale

/// Fills `:delayed` with `count` payloads all due in the past, inserted in reverse due order.
async fn fill_due(redis: &TestRedis, conn: &mut Conn, key: &str, count: u64) {
    let now = redis.server_time().await;
    let members: Vec<(f64, String)> = (0..count)
        .rev()
        .map(|n| (now - 100_000.0 + n as f64 * 0.001, raw_payload(n)))
        .collect();
    zadd_all(conn, key, &members).await;
    assert_eq!(
        conn.zcard::<_, u64>(key).await.unwrap(),
        count,
        "{count} delayed"
    );
}

#[tokio::test]
async fn ten_thousand_due_at_once_migrate_in_order_with_balanced_tokens() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");
    fill_due(&redis, &mut conn, &keys.delayed, 10_000).await;

    let mut next = 0;
    loop {
        let jobs = pop(&queue, &keys).await.jobs;
        let (ready, tokens): (u64, u64) = redis::pipe()
            .llen(&keys.ready)
            .llen(&keys.notify)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            tokens, ready,
            "one notify token per ready job after popping #{next}"
        );
        let Some(job) = jobs.first() else { break };
        assert_eq!(jobs.len(), 1);
        assert_eq!(*job, with_attempts(&raw_payload(next), 1), "pop #{next}");
        if next == 0 {
            assert_eq!(ready, 9_999, "all migrated by the first pop");
            assert!(!exists(&mut conn, &keys.delayed).await);
        }
        next += 1;
    }
    assert_eq!(next, 10_000);
    assert!(!exists(&mut conn, &keys.ready).await);
    assert!(!exists(&mut conn, &keys.notify).await);
    assert_eq!(conn.zcard::<_, u64>(&keys.reserved).await.unwrap(), 10_000);
}

#[tokio::test]
async fn hundred_thousand_due_at_once_migrate_in_bounded_chunks() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;

    // All at once, in one script: chunked RPUSH, no unpack limit hit.
    let all = QueueKeys::new("all");
    fill_due(&redis, &mut conn, &all.delayed, 100_000).await;
    let popped = queue.pop(&all, RETRY_AFTER, 1, MIGRATE_ALL).await.unwrap();
    assert_eq!(popped.jobs, [with_attempts(&raw_payload(0), 1)]);
    assert_eq!(llen(&mut conn, &all.ready).await, 99_999);
    assert_eq!(llen(&mut conn, &all.notify).await, 99_999);
    assert!(!exists(&mut conn, &all.delayed).await);
    let ready = lrange(&mut conn, &all.ready).await;
    assert!(
        ready.iter().zip(1..).all(|(p, n)| *p == raw_payload(n)),
        "ready list in due order"
    );

    // Bounded: at most 1,000 migrate per pop; draining yields every job in due order.
    let bounded = QueueKeys::new("bounded");
    fill_due(&redis, &mut conn, &bounded.delayed, 100_000).await;
    let popped = queue.pop(&bounded, RETRY_AFTER, 1, 1000).await.unwrap();
    assert_eq!(popped.jobs, [with_attempts(&raw_payload(0), 1)]);
    assert_eq!(popped.next_due, Some(Duration::ZERO), "more jobs are due");
    assert_eq!(llen(&mut conn, &bounded.ready).await, 999);
    assert_eq!(llen(&mut conn, &bounded.notify).await, 999);
    assert_eq!(
        conn.zcard::<_, u64>(&bounded.delayed).await.unwrap(),
        99_000
    );
    let mut next = 1;
    loop {
        let jobs = queue
            .pop(&bounded, RETRY_AFTER, 1000, 1000)
            .await
            .unwrap()
            .jobs;
        if jobs.is_empty() {
            break;
        }
        for job in jobs {
            assert_eq!(job, with_attempts(&raw_payload(next), 1));
            next += 1;
        }
        assert_eq!(
            llen(&mut conn, &bounded.notify).await,
            llen(&mut conn, &bounded.ready).await
        );
    }
    assert_eq!(next, 100_000);
    assert_eq!(
        queue.size("bounded").await.unwrap(),
        QueueSize {
            ready: 0,
            delayed: 0,
            reserved: 100_000,
            groups: 0,
            groups_partial: false,
        }
    );
    assert!(!exists(&mut conn, &bounded.notify).await);
}

// ---------------------------------------------------------------------------------------
// expired and stale reservations

#[tokio::test]
async fn expired_reservation_comes_back_with_attempts_two() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    let first = reserve_until_expired(&redis, &queue, &keys).await;

    let popped = pop(&queue, &keys).await;
    assert_eq!(popped.jobs, [with_attempts(&first, 2)]);
    let reserved = zrange(&mut conn, "queues:q:reserved").await;
    assert_eq!(reserved.len(), 1, "only the new reservation: {reserved:?}");
    assert_eq!(reserved[0].0, with_attempts(&first, 2));
    assert_eq!(llen(&mut conn, "queues:q").await, 0);
    assert_eq!(llen(&mut conn, "queues:q:notify").await, 0);
}

#[tokio::test]
async fn stale_reservation_release_delete_fail_return_false_and_change_nothing() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    Numbered { n: 2 }
        .dispatch()
        .on_queue("q")
        .delay(600)
        .sent_via(&queue)
        .await;
    let stale = reserve_until_expired(&redis, &queue, &keys).await;
    let current = pop(&queue, &keys).await.jobs.remove(0);
    assert_eq!(current, with_attempts(&stale, 2));

    let record = FailedJob::new("u", "redis", "q", stale.clone(), "boom");
    let before = snapshot(&mut conn, &keys).await;
    assert!(!queue.release(&keys, &stale, Duration::ZERO).await.unwrap());
    assert!(!queue.delete(&keys, &stale).await.unwrap());
    assert!(!queue.fail(&keys, Some(&stale), &record).await.unwrap());
    assert!(!queue.delete(&keys, "never reserved").await.unwrap());
    assert_eq!(snapshot(&mut conn, &keys).await, before);

    // Once deleted, the current reservation is stale as well.
    assert!(queue.delete(&keys, &current).await.unwrap());
    let before = snapshot(&mut conn, &keys).await;
    assert!(!queue.delete(&keys, &current).await.unwrap());
    assert!(!queue
        .release(&keys, &current, Duration::ZERO)
        .await
        .unwrap());
    assert!(!queue.fail(&keys, Some(&current), &record).await.unwrap());
    assert_eq!(snapshot(&mut conn, &keys).await, before);
}

// ---------------------------------------------------------------------------------------
// failed jobs

#[tokio::test]
async fn fail_records_the_job_and_removes_the_reservation() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    let uuid = Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await
        .to_string();
    let payload = lrange(&mut conn, "queues:q").await.remove(0);
    let reserved_copy = pop(&queue, &keys).await.jobs.remove(0);
    let record = FailedJob::new(&uuid, "redis", "q", payload.clone(), "RuntimeError: boom");
    assert!(queue
        .fail(&keys, Some(&reserved_copy), &record)
        .await
        .unwrap());
    let now = redis.server_time().await;

    assert!(!exists(&mut conn, "queues:q:reserved").await);
    let stored: String = conn
        .hget(KeyLayout::Standalone.failed_jobs(), &uuid)
        .await
        .unwrap();
    let fields = json_fields(&stored);
    assert_eq!(
        field_names(&fields),
        [
            "uuid",
            "connection",
            "queue",
            "payload",
            "exception",
            "failed_at"
        ]
    );
    let fields: HashMap<String, Value> = fields.into_iter().collect();
    assert_eq!(fields["uuid"], json!(uuid));
    assert_eq!(fields["connection"], json!("redis"));
    assert_eq!(fields["queue"], json!("q"));
    assert_eq!(fields["payload"], json!(payload));
    assert_eq!(fields["exception"], json!("RuntimeError: boom"));
    assert_eq!(fields["failed_at"], json!(record.failed_at));
    let index = zrange(&mut conn, KeyLayout::Standalone.failed_jobs_index()).await;
    assert_eq!(index.len(), 1);
    assert_eq!(index[0].0, uuid);
    assert_close(index[0].1, now, CLOCK_SLACK, "failed_jobs:index score");

    assert_eq!(queue.failed_job(&uuid).await.unwrap(), Some(record.clone()));
    assert_eq!(queue.failed_jobs(10).await.unwrap(), [record]);
    assert_eq!(queue.failed_job("nope").await.unwrap(), None);

    // A job that was never reserved (reserved = None) is recorded too.
    let other = FailedJob::new("other", "redis", "q", "{}", "bad payload");
    assert!(queue.fail(&keys, None, &other).await.unwrap());
    assert_eq!(
        conn.hlen::<_, u64>(KeyLayout::Standalone.failed_jobs())
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        queue.failed_jobs(10).await.unwrap()[0],
        other,
        "newest first"
    );
}

#[tokio::test]
async fn failed_store_keeps_the_newest_max_jobs() {
    let redis = TestRedis::start();
    let queue = redis.queue_with(QueueConfig {
        failed_max_jobs: 5,
        ..QueueConfig::default()
    });
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    // Uuids whose text order is the reverse of their failure order.
    let uuids: Vec<String> = (0..8).map(|i| format!("job-{}", 9 - i)).collect();
    for uuid in &uuids {
        let record = FailedJob::new(uuid, "redis", "q", "{}", "boom");
        assert!(queue.fail(&keys, None, &record).await.unwrap());
        let kept: u64 = conn
            .zcard(KeyLayout::Standalone.failed_jobs_index())
            .await
            .unwrap();
        assert!(kept <= 5, "at most 5 kept, found {kept}");
    }
    let mut kept_index: Vec<String> = zrange(&mut conn, KeyLayout::Standalone.failed_jobs_index())
        .await
        .into_iter()
        .map(|(uuid, _)| uuid)
        .collect();
    let mut kept_hash: Vec<String> = conn
        .hkeys(KeyLayout::Standalone.failed_jobs())
        .await
        .unwrap();
    let mut newest: Vec<String> = uuids[3..].to_vec();
    kept_index.sort();
    kept_hash.sort();
    newest.sort();
    assert_eq!(kept_index, newest, "the index keeps the 5 newest");
    assert_eq!(kept_hash, newest, "the hash keeps the 5 newest");
    let listed: Vec<String> = queue
        .failed_jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uuid)
        .collect();
    let expected: Vec<String> = uuids[3..].iter().rev().cloned().collect();
    assert_eq!(listed, expected, "newest first");
}

#[tokio::test]
async fn failed_store_drops_records_older_than_max_age() {
    let redis = TestRedis::start();
    let queue = redis.queue_with(QueueConfig {
        failed_max_age: Duration::from_secs(3600),
        ..QueueConfig::default()
    });
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    let now = redis.server_time().await;
    for (uuid, age) in [("old", 7200.0), ("older", 90_000.0), ("recent", 60.0)] {
        let record = FailedJob::new(uuid, "redis", "q", "{}", "boom").to_json();
        let _: () = conn
            .hset(KeyLayout::Standalone.failed_jobs(), uuid, record)
            .await
            .unwrap();
        let _: () = conn
            .zadd(KeyLayout::Standalone.failed_jobs_index(), uuid, now - age)
            .await
            .unwrap();
    }
    let record = FailedJob::new("new", "redis", "q", "{}", "boom");
    assert!(queue.fail(&keys, None, &record).await.unwrap());

    let mut kept: Vec<String> = zrange(&mut conn, KeyLayout::Standalone.failed_jobs_index())
        .await
        .into_iter()
        .map(|(uuid, _)| uuid)
        .collect();
    kept.sort();
    assert_eq!(kept, ["new", "recent"]);
    let mut hash: Vec<String> = conn
        .hkeys(KeyLayout::Standalone.failed_jobs())
        .await
        .unwrap();
    hash.sort();
    assert_eq!(hash, ["new", "recent"]);
}

// ---------------------------------------------------------------------------------------
// bulk

#[tokio::test]
async fn bulk_keeps_order_per_queue_and_returns_uuids_in_order() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;

    let mut bulk = Bulk::via(&queue);
    let mut expected_a = Vec::new();
    let mut expected_b = Vec::new();
    for n in 0..2_500u64 {
        let dispatch = Numbered { n }.dispatch();
        if n == 1_250 {
            bulk.add(dispatch.on_queue("a").delay(60)).unwrap();
        } else if n % 3 == 0 {
            bulk.add(dispatch.on_queue("b")).unwrap();
            expected_b.push(n);
        } else {
            bulk.add(dispatch.on_queue("a")).unwrap();
            expected_a.push(n);
        }
    }
    assert_eq!(bulk.len(), 2_500);
    let uuids = bulk.send().await.unwrap();
    assert_eq!(uuids.len(), 2_500);

    let check = |payloads: &[String], expected: &[u64], name: &str| {
        let got: Vec<u64> = payloads.iter().map(|p| data_n(p)).collect();
        assert_eq!(got, expected, "order on queue {name}");
        for payload in payloads {
            let n = data_n(payload) as usize;
            assert_eq!(
                field(payload, "uuid"),
                json!(uuids[n].uuid().to_string()),
                "uuid #{n} returned in order"
            );
        }
    };
    check(&lrange(&mut conn, "queues:a").await, &expected_a, "a");
    check(&lrange(&mut conn, "queues:b").await, &expected_b, "b");
    let delayed: Vec<String> = zrange(&mut conn, "queues:a:delayed")
        .await
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    check(&delayed, &[1_250], "a (delayed)");
    assert!(!exists(&mut conn, "queues:b:delayed").await);
    assert_eq!(
        llen(&mut conn, "queues:b:notify").await,
        expected_b.len() as u64
    );
    // One token per ready job, plus the one that announces a new earliest delayed job.
    assert_eq!(
        llen(&mut conn, "queues:a:notify").await,
        expected_a.len() as u64 + 1
    );
}

#[tokio::test]
async fn bulk_after_a_single_dispatch_pushes_each_job_once() {
    // A single dispatch loads only the push script into the server; the bulk that follows
    // also needs the delayed one. Nothing may be pushed twice while the scripts get loaded.
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;

    Numbered { n: 0 }
        .dispatch()
        .on_queue("a")
        .sent_via(&queue)
        .await;
    let mut bulk = Bulk::via(&queue);
    bulk.add(Numbered { n: 1 }.dispatch().on_queue("a"))
        .unwrap();
    bulk.add(Numbered { n: 2 }.dispatch().on_queue("b"))
        .unwrap();
    bulk.add(Numbered { n: 3 }.dispatch().on_queue("a").delay(60))
        .unwrap();
    bulk.send().await.unwrap();

    let a: Vec<u64> = numbers_in(&mut conn, "queues:a").await;
    assert_eq!(a, [0, 1]);
    let b: Vec<u64> = numbers_in(&mut conn, "queues:b").await;
    assert_eq!(b, [2]);
    assert_eq!(zrange(&mut conn, "queues:a:delayed").await.len(), 1);

    // The same after the server forgot its scripts (a restart, SCRIPT FLUSH).
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    Numbered { n: 4 }
        .dispatch()
        .on_queue("b")
        .sent_via(&queue)
        .await;
    let mut bulk = Bulk::via(&queue);
    bulk.add(Numbered { n: 5 }.dispatch().on_queue("b"))
        .unwrap();
    bulk.add(Numbered { n: 6 }.dispatch().on_queue("a").delay(60))
        .unwrap();
    bulk.send().await.unwrap();
    let b: Vec<u64> = numbers_in(&mut conn, "queues:b").await;
    assert_eq!(b, [2, 4, 5]);
    assert_eq!(zrange(&mut conn, "queues:a:delayed").await.len(), 2);
}

#[tokio::test]
async fn push_all_of_envelopes_keeps_queue_runs_in_order() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;

    let envelope = |n: u64, q: &str| Envelope {
        uuid: Default::default(),
        job: "Numbered".into(),
        queue: q.to_owned(),
        payload: raw_payload(n),
        delay: None,
        unique: None,
        debounce: None,
        track: None,
        group: None,
    };
    // More than one script chunk (1,000) on one queue, interleaved with another queue.
    let mut envelopes: Vec<Envelope> = (0..2_100).map(|n| envelope(n, "a")).collect();
    envelopes.push(envelope(5_000, "b"));
    envelopes.extend((2_100..2_200).map(|n| envelope(n, "a")));
    queue.push_all(&envelopes).await.unwrap();

    let a: Vec<u64> = numbers_in(&mut conn, "queues:a").await;
    assert_eq!(a, (0..2_200).collect::<Vec<_>>());
    assert_eq!(llen(&mut conn, "queues:a:notify").await, 2_200);
    assert_eq!(lrange(&mut conn, "queues:b").await, [raw_payload(5_000)]);
    assert_eq!(llen(&mut conn, "queues:b:notify").await, 1);
}

// ---------------------------------------------------------------------------------------
// malformed payloads, unreachable server, size and clear

#[tokio::test]
async fn non_json_payload_is_reserved_unchanged() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    let garbage = "this is {not JSON";
    push_raw(&mut conn, garbage).await;
    Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;

    let popped = pop(&queue, &keys).await;
    assert_eq!(popped.jobs, [garbage]);
    let reserved = zrange(&mut conn, "queues:q:reserved").await;
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].0, garbage, "kept byte for byte in :reserved");
    assert_eq!(llen(&mut conn, "queues:q").await, 1, "the next job waits");
    assert_eq!(llen(&mut conn, "queues:q:notify").await, 1);

    // The worker can still get rid of it, and the queue goes on.
    assert!(queue.delete(&keys, garbage).await.unwrap());
    let next = pop(&queue, &keys).await.jobs;
    assert_eq!(next.len(), 1);
    assert_eq!(data_n(&next[0]), 1);
}

#[tokio::test]
async fn reservation_raises_only_the_top_level_attempts() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");
    let long = "x".repeat(200);
    // (pushed, reserved copy): keys named "attempts" inside the data, the top-level field far
    // from the end, written with spaces, with several digits, and a payload without one.
    let cases = [
        (
            r#"{"uuid":"a","data":{"attempts":7},"attempts":0,"delay":null}"#.to_owned(),
            r#"{"uuid":"a","data":{"attempts":7},"attempts":1,"delay":null}"#.to_owned(),
        ),
        (
            format!(r#"{{"uuid":"b","attempts":2,"data":{{"s":"{long}"}}}}"#),
            format!(r#"{{"uuid":"b","attempts":3,"data":{{"s":"{long}"}}}}"#),
        ),
        (
            format!(r#"{{"uuid":"c","data":{{"attempts":"x","s":"{long}"}},"attempts" : 9}}"#),
            format!(r#"{{"uuid":"c","data":{{"attempts":"x","s":"{long}"}},"attempts" : 10}}"#),
        ),
        (
            r#"{"uuid":"d","attempts":0,"attempts":41,"delay":5}"#.to_owned(),
            r#"{"uuid":"d","attempts":0,"attempts":42,"delay":5}"#.to_owned(),
        ),
        (
            r#"{"uuid":"e","data":{"attempts":null}}"#.to_owned(),
            r#"{"uuid":"e","data":{"attempts":null}}"#.to_owned(),
        ),
    ];
    for (pushed, _) in &cases {
        push_raw(&mut conn, pushed).await;
    }
    let popped = queue
        .pop(&keys, RETRY_AFTER, cases.len(), MIGRATE_ALL)
        .await
        .unwrap();
    let expected: Vec<&String> = cases.iter().map(|(_, reserved)| reserved).collect();
    assert_eq!(popped.jobs.iter().collect::<Vec<_>>(), expected);
    let mut reserved: Vec<String> = zrange(&mut conn, "queues:q:reserved")
        .await
        .into_iter()
        .map(|(member, _)| member)
        .collect();
    reserved.sort();
    assert_eq!(reserved.iter().collect::<Vec<_>>(), expected);
}

#[tokio::test]
async fn dispatch_to_a_dead_port_fails_fast() {
    let port = tests::CLOSED_PORT;
    let queue = redjob::RedisQueue::with_config(
        &format!("redis://127.0.0.1:{port}/"),
        QueueConfig {
            command_timeout: Duration::from_secs(1),
            ..QueueConfig::default()
        },
    )
    .unwrap();

    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), async {
        Numbered { n: 1 }.dispatch().via(&queue).await
    })
    .await
    .expect("dispatch must not hang");
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(Error::Unreachable(_) | Error::Timeout(_))),
        "unreachable or timeout, got {result:?}"
    );
    assert!(elapsed < Duration::from_secs(3), "failed after {elapsed:?}");

    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        queue.pop(&QueueKeys::new("q"), RETRY_AFTER, 1, 1),
    )
    .await
    .expect("pop must not hang");
    assert!(
        matches!(result, Err(Error::Unreachable(_) | Error::Timeout(_))),
        "unreachable or timeout, got {result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn size_counts_and_clear_deletes_all_four_keys() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");

    assert_eq!(queue.size("q").await.unwrap(), QueueSize::default());
    for n in 0..3 {
        Numbered { n }
            .dispatch()
            .on_queue("q")
            .sent_via(&queue)
            .await;
    }
    for n in 3..5 {
        Numbered { n }
            .dispatch()
            .on_queue("q")
            .delay(600)
            .sent_via(&queue)
            .await;
    }
    Numbered { n: 9 }
        .dispatch()
        .on_queue("other")
        .sent_via(&queue)
        .await;
    assert_eq!(pop(&queue, &keys).await.jobs.len(), 1);
    let size = queue.size("q").await.unwrap();
    assert_eq!(
        size,
        QueueSize {
            ready: 2,
            delayed: 2,
            reserved: 1,
            groups: 0,
            groups_partial: false,
        }
    );
    assert_eq!(size.total(), 5);

    assert_eq!(queue.clear("q").await.unwrap(), 5);
    for key in [&keys.ready, &keys.delayed, &keys.reserved, &keys.notify] {
        assert!(!exists(&mut conn, key).await, "{key} deleted by clear");
    }
    assert_eq!(queue.size("q").await.unwrap(), QueueSize::default());
    assert_eq!(queue.clear("q").await.unwrap(), 0);
    assert_eq!(
        queue.size("other").await.unwrap().ready,
        1,
        "other queue untouched"
    );
}

#[tokio::test]
async fn extend_pushes_back_held_reservations_only() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("q");
    Numbered { n: 1 }
        .dispatch()
        .on_queue("q")
        .sent_via(&queue)
        .await;
    let held = queue
        .pop(&keys, Duration::from_secs(5), 1, MIGRATE_ALL)
        .await
        .unwrap()
        .jobs
        .remove(0);
    let extended = WorkerQueue::of(&queue)
        .extend(ExtendArgs {
            queue: &keys,
            retry_after: Duration::from_secs(1000),
            reserved: &[held.as_str(), "not reserved"],
        })
        .await
        .unwrap();
    assert_eq!(extended, 1);
    let reserved = zrange(&mut conn, &keys.reserved).await;
    assert_eq!(reserved.len(), 1, "nothing was added: {reserved:?}");
    let now = redis.server_time().await;
    assert_close(reserved[0].1, now + 1000.0, 2.0, "the extended expiry");
}
