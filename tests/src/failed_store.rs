//! Failed-job records written straight into the store, in the format workers write them, for
//! tests and benchmarks of listing, searching and retrying a large store.

use chrono::{DateTime, SecondsFormat};
use redjob::payload::failed::FailedJob;
use redjob::RedisQueue;

/// One failed job to put in the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Seeded {
    /// Its uuid.
    pub uuid: String,
    /// The queue it failed on.
    pub queue: String,
    /// Its payload's `job` and `displayName`.
    pub job: String,
    /// Its payload's tags.
    pub tags: Vec<String>,
    /// Why it failed.
    pub exception: String,
    /// When it failed: Unix seconds, the index's score.
    pub failed_at: f64,
}

impl Seeded {
    /// The `n`th of a varied set: queues `q0`..`q2`, jobs `Mail`/`Invoice`/`Report`, every
    /// fifth tagged `vip`, failing a second apart from `start` (Unix seconds) on.
    pub fn nth(n: usize, start: f64) -> Seeded {
        Seeded {
            uuid: uuid::Uuid::new_v4().to_string(),
            queue: format!("q{}", n % 3),
            job: ["Mail", "Invoice", "Report"][n % 7 % 3].to_owned(),
            tags: if n % 5 == 0 {
                vec!["vip".to_owned(), format!("n:{n}")]
            } else {
                vec![format!("n:{n}")]
            },
            exception: format!("Timeout talking to host-{} (attempt {n})", n % 11),
            failed_at: start + n as f64,
        }
    }

    /// The payload as a worker pushed it.
    pub fn payload(&self) -> String {
        serde_json::json!({
            "uuid": self.uuid,
            "displayName": self.job,
            "job": self.job,
            "maxTries": null,
            "attempts": 3,
            "tags": self.tags,
            "data": {},
        })
        .to_string()
    }

    /// The record as the store holds it.
    pub fn record(&self) -> String {
        let at = DateTime::from_timestamp_millis((self.failed_at * 1000.0) as i64)
            .expect("a seeded time is a valid time");
        FailedJob {
            uuid: self.uuid.clone(),
            connection: "redis".to_owned(),
            queue: self.queue.clone(),
            payload: self.payload(),
            exception: self.exception.clone(),
            failed_at: at.to_rfc3339_opts(SecondsFormat::Secs, true),
        }
        .to_json()
    }
}

/// Writes `records` into the failed-job store of `queue`'s Redis, a thousand per pipeline.
pub async fn seed_failed(queue: &RedisQueue, records: &[Seeded]) {
    let keys = queue.keys();
    let mut conn = queue.connection();
    for chunk in records.chunks(1000) {
        let mut pipe = redis::pipe();
        for seeded in chunk {
            pipe.hset(keys.failed_jobs(), &seeded.uuid, seeded.record())
                .ignore()
                .zadd(keys.failed_jobs_index(), &seeded.uuid, seeded.failed_at)
                .ignore();
        }
        let () = pipe
            .query_async(&mut conn)
            .await
            .expect("the failed-job store takes the records");
    }
}
