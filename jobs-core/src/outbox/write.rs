//! Dispatches written into the outbox, in the caller's transaction.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::dispatch::{Bulk, PendingDispatch};
use crate::job::Job;
use crate::payload::delay::Delay;
use crate::queue::{Envelope, RedisQueue};
use crate::status::{Tracked, TrackedDispatch};
use crate::workflow::{Batch, Chain, Link};

use super::offline::OfflineOutboxes;
use super::{Outbox, OutboxError};

impl<J: Job> PendingDispatch<J> {
    /// Writes the job into the default outbox ([`Outbox::default`]) through `conn`, a
    /// transaction (`&mut tx`) or a connection, instead of pushing it: it reaches Redis once
    /// the transaction commits and a [`Relay`](super::Relay) moves it, and never if the
    /// transaction rolls back. Returns the job's uuid.
    ///
    /// The payload is built and signed now, by the handle the dispatch names (`.via`) or the
    /// default one, which is not reached: Redis may be down. A delay counts from now, not from
    /// the relay.
    ///
    /// Through a fake queue's handle ([`crate::testing`]) nothing is written into the table:
    /// the fake records the job once the transaction commits.
    pub async fn in_transaction(self, conn: &mut PgConnection) -> Result<Uuid, OutboxError> {
        self.in_outbox(&Outbox::default(), conn).await
    }

    /// Writes the job into `outbox` through `conn`, as
    /// [`in_transaction`](Self::in_transaction) does into the default one.
    pub async fn in_outbox(
        self,
        outbox: &Outbox,
        conn: &mut PgConnection,
    ) -> Result<Uuid, OutboxError> {
        Ok(self.written(outbox, conn).await?.0)
    }

    /// Writes the job into `outbox`; returns its uuid and the handle that built it.
    async fn written(
        self,
        outbox: &Outbox,
        conn: &mut PgConnection,
    ) -> Result<(Uuid, RedisQueue), OutboxError> {
        let (queue, envelope) = self.prepare()?;
        let uuid = envelope.uuid;
        outbox.write(&queue, conn, vec![envelope]).await?;
        Ok((uuid, queue))
    }
}

impl<J: Job> TrackedDispatch<J> {
    /// Writes the tracked job into the default outbox through `conn`, as
    /// [`PendingDispatch::in_transaction`] does, and returns its typed handle: its status
    /// reads `queued` (or `delayed`) from the moment a relay pushes it, and
    /// [`Tracked::wait`] gives its output once it is done.
    ///
    /// ```no_run
    /// # use redjob::{job, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct Export { report: i64 }
    /// # #[job] impl Job for Export {
    /// #     type Output = String;
    /// #     async fn handle(&self, _: &JobContext) -> JobResult<String> { Ok(String::new()) }
    /// # }
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = pool.begin().await?;
    /// let export = Export { report: 7 }.dispatch().track().in_transaction(&mut tx).await?;
    /// tx.commit().await?;
    /// let path: String = export.wait(std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn in_transaction(self, conn: &mut PgConnection) -> Result<Tracked<J>, OutboxError> {
        self.in_outbox(&Outbox::default(), conn).await
    }

    /// Writes the tracked job into `outbox` through `conn`, as
    /// [`in_transaction`](Self::in_transaction) does into the default one.
    pub async fn in_outbox(
        self,
        outbox: &Outbox,
        conn: &mut PgConnection,
    ) -> Result<Tracked<J>, OutboxError> {
        let (uuid, queue) = self.into_dispatch().written(outbox, conn).await?;
        Ok(queue.tracked(uuid))
    }
}

impl Bulk {
    /// Writes every job into the default outbox through `conn`, in one statement, as
    /// [`PendingDispatch::in_transaction`] writes one. Returns their uuids, in order.
    pub async fn in_transaction(self, conn: &mut PgConnection) -> Result<Vec<Uuid>, OutboxError> {
        self.in_outbox(&Outbox::default(), conn).await
    }

    /// Writes every job into `outbox` through `conn`.
    pub async fn in_outbox(
        self,
        outbox: &Outbox,
        conn: &mut PgConnection,
    ) -> Result<Vec<Uuid>, OutboxError> {
        let (queue, envelopes) = self.prepare()?;
        let uuids = envelopes.iter().map(|envelope| envelope.uuid).collect();
        outbox.write(&queue, conn, envelopes).await?;
        Ok(uuids)
    }
}

impl Chain {
    /// Refused for now: fails with [`OutboxError::Workflow`] and writes nothing. A relay
    /// pushes one job at a time under its uuid's guard, while a chain keeps its later links
    /// and its catch job in Redis in the step that pushes its first job; a relay that carried
    /// that step only in part could run a link twice or lose one. Dispatch the chain after the
    /// commit.
    pub async fn in_transaction(self, conn: &mut PgConnection) -> Result<Uuid, OutboxError> {
        let _ = conn;
        Err(OutboxError::Workflow { what: "a chain" })
    }
}

impl Batch {
    /// Refused for now: fails with [`OutboxError::Workflow`] and writes nothing. A batch's
    /// record, counters and jobs are written in Redis together (in parts of a thousand jobs
    /// for a large one), which a relay's push of one job at a time does not take. Dispatch the
    /// batch after the commit.
    pub async fn in_transaction(self, conn: &mut PgConnection) -> Result<Uuid, OutboxError> {
        let _ = conn;
        Err(OutboxError::Workflow { what: "a batch" })
    }
}

/// A row of the outbox: the job as the relay will push it, and a unique job's lock.
pub(super) struct Row {
    pub(super) link: Link,
    pub(super) unique: Option<UniqueLockRow>,
}

/// A unique job's lock, as a row keeps it: its key under the prefix, how long it lasts.
pub(super) struct UniqueLockRow {
    pub(super) key: String,
    pub(super) lasts_ms: i64,
}

/// Refuses what the outbox does not carry: a debounced job's window lives in Redis at the
/// push, which a transaction cannot hold.
fn carried(envelope: &Envelope) -> Result<(), OutboxError> {
    match envelope.debounce {
        Some(_) => Err(OutboxError::Unsupported {
            job: envelope.job.to_string(),
            what: "a debounced job",
        }),
        None => Ok(()),
    }
}

/// The row of a job: sealed by `queue`, due at a point in time.
fn row(queue: &RedisQueue, mut envelope: Envelope) -> Result<Row, OutboxError> {
    let unique = envelope.unique.take().map(|unique| UniqueLockRow {
        key: unique.lock.key,
        // At most ten years (the dispatch's bound), well within an i64.
        lasts_ms: unique.lasts.as_millis() as i64,
    });
    // The relay pushes later than now: the job keeps the due time it has now.
    if let Some(Delay::After(after)) = envelope.delay {
        let after = chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX);
        let due = chrono::Utc::now()
            .checked_add_signed(after)
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
        envelope.delay = Some(Delay::At(due));
    }
    Ok(Row {
        link: Link::sealed(queue, envelope)?,
        unique,
    })
}

impl Outbox {
    /// Writes the jobs of `envelopes`, built by `queue`, through `conn`: into this table, or
    /// to the offline counterpart of a handle that talks to no Redis (a fake records them when
    /// the transaction commits). Nothing is written unless every job can be carried.
    async fn write(
        &self,
        queue: &RedisQueue,
        conn: &mut PgConnection,
        envelopes: Vec<Envelope>,
    ) -> Result<(), OutboxError> {
        envelopes.iter().try_for_each(carried)?;
        if queue.is_offline() {
            // An offline handle's jobs never reach a table a relay could move.
            let offline = queue
                .offline_part::<OfflineOutboxes>()
                .ok_or(OutboxError::Offline)?;
            return offline.0.write(conn, envelopes).await;
        }
        let rows = envelopes
            .into_iter()
            .map(|envelope| row(queue, envelope))
            .collect::<Result<Vec<Row>, OutboxError>>()?;
        self.insert(conn, &rows).await
    }

    /// Inserts `rows` and notifies the relays, in one statement; the notification is
    /// delivered when the transaction commits, and not at all if it rolls back.
    async fn insert(&self, conn: &mut PgConnection, rows: &[Row]) -> Result<(), OutboxError> {
        if rows.is_empty() {
            return Ok(());
        }
        let links = rows.iter().map(|row| &row.link);
        let uuids: Vec<String> = links.clone().map(|l| l.uuid.to_string()).collect();
        let queues: Vec<&str> = links.clone().map(|l| l.queue.as_str()).collect();
        let jobs: Vec<&str> = links.clone().map(|l| l.job.as_str()).collect();
        let encoded: Vec<String> = links.map(Link::encode).collect();
        let unique = rows.iter().map(|row| row.unique.as_ref());
        let unique_keys: Vec<Option<&str>> =
            unique.clone().map(|u| u.map(|u| u.key.as_str())).collect();
        let unique_ms: Vec<Option<i64>> = unique.map(|u| u.map(|u| u.lasts_ms)).collect();
        let sql = format!(
            "WITH written AS (INSERT INTO {} (uuid, queue, job, link, unique_key, unique_ms) \
             SELECT * FROM UNNEST($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], \
             $5::text[], $6::bigint[])) \
             SELECT pg_notify($7, '')",
            self.name()
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(uuids)
            .bind(queues)
            .bind(jobs)
            .bind(encoded)
            .bind(unique_keys)
            .bind(unique_ms)
            .bind(self.channel())
            .execute(conn)
            .await?;
        Ok(())
    }
}
