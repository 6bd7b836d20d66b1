//! Secure by default, against real redis-servers and the real worker: TLS through
//! `rediss://` with a CA made for the test, ACL users and passwords in the URL, payload
//! signing, and the payload size limit at dispatch.

use examples::{now_ms, Flaky, Noop, Record, RECORDS_KEY};
use redis::AsyncCommands;
use redjob::queue::keys::QueueKeys;
use redjob::{Bulk, Error, Payload, QueueConfig, RedisQueue, SigningKey};
use std::time::Duration;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, SentVia, TestRedis};

const LONG: Duration = Duration::from_secs(30);
/// How soon a worker refused for its settings has exited.
const REFUSED_WITHIN: Duration = Duration::from_secs(5);

const SIGNING_SECRET: &str = "5b2f0c8e4a7d19e3b6c0f2a8d4e6b1c3a9f7e5d3c1b0a8f6e4d2c0b9a7f5e3d1";

fn start_worker(redis_url: &str, args: &[&str], env: &[(&str, &str)]) -> WorkerProcess {
    WorkerProcess::start_with_env(env!("CARGO_BIN_EXE_test_worker"), redis_url, args, env)
}

/// Runs a worker with `--stop-when-empty` until it exits, which it must do with status 0.
async fn run_until_empty(redis_url: &str, env: &[(&str, &str)]) -> WorkerProcess {
    let mut worker = start_worker(redis_url, &["--stop-when-empty"], env);
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    worker
}

fn signed_config() -> QueueConfig {
    QueueConfig {
        signing_key: Some(SigningKey::new(SIGNING_SECRET)),
        ..QueueConfig::default()
    }
}

/// The failed-job records' reasons, by uuid.
async fn failure_reasons(queue: &RedisQueue) -> Vec<(String, String)> {
    queue
        .failed_jobs(1000)
        .await
        .unwrap()
        .into_iter()
        .map(|record| (record.uuid, record.exception))
        .collect()
}

#[tokio::test]
async fn jobs_dispatched_over_tls_run_through_the_worker_woken_over_tls() {
    let redis = TestRedis::start_tls();
    assert!(redis.url().starts_with("rediss://"));
    let ca_file = redis.ca_file().unwrap().to_str().unwrap().to_owned();
    let queue = redis.queue();
    let mut conn = redis.conn().await;

    // --sleep 30: only the waker's BLPOP, on its own TLS connection, can start the job quickly.
    let mut worker = start_worker(
        redis.url(),
        &["--sleep", "30"],
        &[("REDIS_TLS_CA_FILE", &ca_file)],
    );
    worker.wait_started().await;
    tests::wait_for_idle_worker(&conn, LONG).await;
    let pushed_at = now_ms();
    let uuid = Record { due_ms: pushed_at }
        .dispatch()
        .sent_via(&queue)
        .await;
    worker
        .wait_for_event(LONG, "the record job is done", |e| {
            e.uuid == uuid.to_string() && e.status == "DONE"
        })
        .await;
    // The handler wrote its record through the worker's own TLS handle.
    let records: Vec<String> = conn.lrange(RECORDS_KEY, 0, -1).await.unwrap();
    assert_eq!(records.len(), 1);
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    let late = record["started_ms"].as_u64().unwrap() - pushed_at;
    assert!(late < 5_000, "the job started {late} ms after its push");
    tests::wait_for_empty_queue(&queue, "default", LONG).await;
    worker.signal("TERM");
    assert!(worker.wait_exit(LONG).await.success());
    println!("tls: 1 job dispatched and run over rediss://, started {late} ms after its push");
}

#[tokio::test]
async fn a_tls_server_is_reached_only_over_tls_with_a_trusted_ca() {
    let redis = TestRedis::start_tls();

    // Plain TCP to the TLS port gets no Redis answer.
    let plain_url = redis.url().replacen("rediss://", "redis://", 1);
    let plain = RedisQueue::with_config(&plain_url, quick(QueueConfig::default())).unwrap();
    let err = plain.size("default").await.unwrap_err();
    assert!(
        matches!(err, Error::Unreachable(_) | Error::Timeout(_)),
        "{err:?}"
    );

    // Without the test CA, the server's certificate is not trusted.
    let untrusted = RedisQueue::with_config(
        redis.url(),
        quick(QueueConfig {
            tls_ca_file: None,
            ..QueueConfig::default()
        }),
    )
    .unwrap();
    let err = untrusted.size("default").await.unwrap_err();
    assert!(matches!(err, Error::TlsHandshake(_)), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");
    // A worker without it refuses to start, saying why.
    let mut worker = start_worker(redis.url(), &[], &[]);
    worker
        .wait_refused(REFUSED_WITHIN, "the TLS handshake with Redis failed")
        .await;

    // A CA file for a redis:// URL, or one that cannot be read, is refused at once.
    let err = RedisQueue::with_config(&plain_url, redis.config()).unwrap_err();
    assert!(matches!(err, Error::InvalidTls { .. }), "{err:?}");
    let missing = QueueConfig {
        tls_ca_file: Some(redis.dir().join("no-such-ca.crt")),
        ..QueueConfig::default()
    };
    let err = RedisQueue::with_config(redis.url(), missing).unwrap_err();
    assert!(matches!(err, Error::TlsCaFile { .. }), "{err:?}");
    let not_pem = QueueConfig {
        tls_ca_file: Some(redis.dir().join("redis.log")),
        ..QueueConfig::default()
    };
    let err = RedisQueue::with_config(redis.url(), not_pem).unwrap_err();
    assert!(matches!(err, Error::InvalidTls { .. }), "{err:?}");

    assert_eq!(redis.queue().size("default").await.unwrap().total(), 0);
}

/// Settings that give up on an unusable server quickly.
fn quick(config: QueueConfig) -> QueueConfig {
    QueueConfig {
        command_timeout: Duration::from_secs(2),
        ..config
    }
}

#[tokio::test]
async fn an_acl_user_in_the_url_dispatches_and_works_and_a_wrong_password_is_refused() {
    let redis = TestRedis::start();
    let mut admin = redis.conn().await;
    // A user limited to the queue keys and the commands the queue needs.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "jobs",
            "on",
            ">right-password",
            "~queues:*",
            "~failed_jobs*",
            "+@all",
            "-@dangerous",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    // A user that may not run scripts.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "noscripts",
            "on",
            ">pw",
            "~*",
            "+@all",
            "-evalsha",
            "-eval",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    // Nobody gets in without credentials any more.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "off"])
        .query_async(&mut admin)
        .await
        .unwrap();
    drop(admin);

    let wrong_url = redis.url_as("jobs", "wrong-password");
    let wrong = RedisQueue::with_config(&wrong_url, quick(QueueConfig::default())).unwrap();
    let err = Noop {}.dispatch().via(&wrong).await.unwrap_err();
    assert!(matches!(err, Error::AuthenticationFailed(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with("Redis refused the credentials"),
        "{message}"
    );
    assert!(!format!("{wrong:?}").contains("wrong-password"));
    let anonymous = RedisQueue::with_config(redis.url(), quick(QueueConfig::default())).unwrap();
    let err = Noop {}.dispatch().via(&anonymous).await.unwrap_err();
    assert!(matches!(err, Error::AuthenticationFailed(_)), "{err:?}");

    let right_url = redis.url_as("jobs", "right-password");
    let queue = RedisQueue::open(&right_url).unwrap();
    let uuid = Noop {}.dispatch().sent_via(&queue).await;

    // A worker with the wrong password refuses to start, saying why in one line, and takes
    // nothing.
    let mut refused = start_worker(&wrong_url, &[], &[]);
    refused
        .wait_refused(REFUSED_WITHIN, "Redis refused the credentials")
        .await;
    // So does one whose user may not run scripts.
    let mut no_scripts = start_worker(&redis.url_as("noscripts", "pw"), &[], &[]);
    no_scripts
        .wait_refused(REFUSED_WITHIN, "Redis denies a command this needs")
        .await;
    assert_eq!(queue.size("default").await.unwrap().ready, 1);

    let worker = run_until_empty(&right_url, &[]).await;
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == uuid.to_string() && e.status == "DONE"));
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
    assert!(failure_reasons(&queue).await.is_empty());
}

#[tokio::test]
async fn a_worker_waits_for_an_unreachable_redis_saying_why_then_starts() {
    let mut redis = TestRedis::start();
    redis.kill();
    let mut worker = start_worker(redis.url(), &["--stop-when-empty"], &[]);
    wait_until(LONG, "the worker says why it waits", || {
        let said = worker.lines().iter().any(|l| {
            l.contains("cannot reach Redis to start; retrying")
                && l.contains("Redis is unreachable")
        });
        async move { said }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(worker.is_running(), "an unreachable Redis is waited for");

    redis.restart();
    let uuid = Noop {}.dispatch().sent_via(&redis.queue()).await;
    let status = worker.wait_exit(LONG).await;
    assert!(status.success(), "the worker exited with {status}");
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == uuid.to_string() && e.status == "DONE"));
}

#[tokio::test]
async fn a_signing_worker_runs_signed_jobs_and_fails_unsigned_or_altered_ones() {
    let redis = TestRedis::start();
    let queue = redis.queue_with(signed_config());
    let mut conn = redis.conn().await;
    let keys = QueueKeys::new("default");

    // Signed by dispatch; attempts change on every reservation and retry, the signature holds.
    let retried = Flaky { fail_times: 1 }
        .dispatch()
        .tries(2)
        .sent_via(&queue)
        .await;
    let pushed: Vec<String> = conn.lrange(&keys.ready, 0, -1).await.unwrap();
    let signed = Payload::from_json(&pushed[0]).unwrap();
    assert_eq!(signed.signature.as_ref().map(String::len), Some(64));
    assert!(SigningKey::new(SIGNING_SECRET).verify(&signed).is_ok());

    // Written straight into the list by someone without the key.
    let unsigned = Noop {}.dispatch().envelope().unwrap();
    let _: () = conn.rpush(&keys.ready, &unsigned.payload).await.unwrap();
    let altered = pushed[0].replace(r#""fail_times":1"#, r#""fail_times":0"#);
    assert_ne!(altered, pushed[0]);
    let altered_uuid = Payload::from_json(&altered).unwrap().uuid;
    // The same job again under a new uuid: its signature no longer matches.
    let relabelled = pushed[0].replace(
        &signed.uuid.to_string(),
        "00000000-0000-4000-8000-000000000001",
    );
    let _: () = conn.rpush(&keys.ready, &altered).await.unwrap();
    let _: () = conn.rpush(&keys.ready, &relabelled).await.unwrap();
    let mut bulk = Bulk::via(&queue);
    bulk.add(Noop {}.dispatch()).unwrap();
    bulk.add(Noop {}.dispatch().delay(3600)).unwrap();
    let after = bulk.send().await.unwrap();
    let delayed: Vec<String> = conn.zrange(&keys.delayed, 0, -1).await.unwrap();
    let delayed = Payload::from_json(&delayed[0]).unwrap();
    assert_eq!(delayed.uuid, after[1].uuid());
    assert!(SigningKey::new(SIGNING_SECRET).verify(&delayed).is_ok());

    let worker = run_until_empty(redis.url(), &[("JOBS_SIGNING_KEY", SIGNING_SECRET)]).await;

    let events = worker.events();
    let done = |uuid: String| events.iter().any(|e| e.uuid == uuid && e.status == "DONE");
    assert!(
        events
            .iter()
            .any(|e| e.uuid == retried.to_string() && e.status == "DONE" && e.attempt == 2),
        "the signed flaky job ran again and succeeded: {events:#?}"
    );
    assert!(done(after[0].uuid().to_string()));
    let reasons = failure_reasons(&queue).await;
    let reason_of = |uuid: String| {
        reasons
            .iter()
            .find(|(id, _)| *id == uuid)
            .map(|(_, reason)| reason.clone())
            .unwrap_or_else(|| panic!("no failed record for {uuid}: {reasons:#?}"))
    };
    assert_eq!(
        reason_of(unsigned.uuid.to_string()),
        "signature mismatch: the payload is not signed"
    );
    assert_eq!(
        reason_of(altered_uuid.to_string()),
        "signature mismatch: the payload was altered or signed with another key"
    );
    assert_eq!(
        reason_of("00000000-0000-4000-8000-000000000001".to_owned()),
        "signature mismatch: the payload was altered or signed with another key"
    );
    assert_eq!(reasons.len(), 3, "{reasons:#?}");
    // The altered copy shares the genuine job's uuid: only the genuine job's two attempts ran.
    assert_eq!(altered_uuid, retried);
    let runs = events
        .iter()
        .filter(|e| e.status == "RUNNING" && e.uuid == retried.to_string())
        .count();
    assert_eq!(runs, 2, "an altered job never runs: {events:#?}");
    let left = queue.size("default").await.unwrap();
    assert_eq!((left.ready, left.reserved, left.delayed), (0, 0, 1));
    println!(
        "signing: 2 signed jobs run (one of them retried), 1 delayed one signed, 3 unsigned or \
         altered payloads failed with \"signature mismatch\", 0 lost"
    );
}

#[tokio::test]
async fn a_worker_without_a_key_runs_signed_jobs() {
    let redis = TestRedis::start();
    let queue = redis.queue_with(signed_config());
    let uuid = Noop {}.dispatch().sent_via(&queue).await;
    let worker = run_until_empty(redis.url(), &[]).await;
    assert!(worker
        .events()
        .iter()
        .any(|e| e.uuid == uuid.to_string() && e.status == "DONE"));
    assert!(failure_reasons(&queue).await.is_empty());
}

#[tokio::test]
async fn dispatch_refuses_a_payload_over_the_size_limit_and_pushes_nothing() {
    let redis = TestRedis::start();
    let limit = 120;
    let queue = redis.queue_with(QueueConfig {
        max_payload_bytes: limit,
        ..QueueConfig::default()
    });
    let size = Noop {}.dispatch().envelope().unwrap().payload.len();
    assert!(size > limit, "a noop payload is {size} bytes");

    let err = Noop {}.dispatch().via(&queue).await.unwrap_err();
    match &err {
        Error::PayloadTooLarge {
            job,
            size: refused,
            limit: reported,
        } => {
            assert_eq!(job, "noop");
            assert_eq!(*refused, size);
            assert_eq!(*reported, limit);
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("payload of job noop is {size} bytes, over the limit of {limit} bytes")
    );
    // One oversized job in a bulk refuses the whole bulk.
    let roomy = redis.queue_with(QueueConfig {
        max_payload_bytes: size + 10,
        ..QueueConfig::default()
    });
    let mut bulk = Bulk::via(&roomy);
    bulk.add(Noop {}.dispatch()).unwrap();
    bulk.add(Record { due_ms: u64::MAX }.dispatch()).unwrap();
    let err = bulk.send().await.unwrap_err();
    assert!(
        matches!(&err, Error::PayloadTooLarge { job, .. } if job == "record"),
        "{err:?}"
    );
    // The signature counts: a payload that fits only unsigned is refused once signed.
    let signing = redis.queue_with(QueueConfig {
        max_payload_bytes: size + 10,
        ..signed_config()
    });
    let err = Noop {}.dispatch().via(&signing).await.unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err:?}");
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}
