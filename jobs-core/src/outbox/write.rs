//! Dispatches written into the outbox, in the caller's transaction.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::dispatch::{Bulk, PendingDispatch};
use crate::job::Job;
use crate::payload::delay::Delay;
use crate::queue::{Envelope, RedisQueue};
use crate::workflow::Link;

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
        let (queue, envelope) = self.prepare()?;
        let link = link(&queue, envelope)?;
        let uuid = link.uuid;
        outbox.insert(conn, &[link]).await?;
        Ok(uuid)
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
        let links = envelopes
            .into_iter()
            .map(|envelope| link(&queue, envelope))
            .collect::<Result<Vec<Link>, OutboxError>>()?;
        outbox.insert(conn, &links).await?;
        Ok(links.iter().map(|link| link.uuid).collect())
    }
}

/// The job as the relay will push it: sealed by `queue`, due at a point in time.
fn link(queue: &RedisQueue, mut envelope: Envelope) -> Result<Link, OutboxError> {
    let unsupported = if envelope.unique.is_some() {
        Some("a unique job")
    } else if envelope.debounce.is_some() {
        Some("a debounced job")
    } else {
        None
    };
    if let Some(what) = unsupported {
        return Err(OutboxError::Unsupported {
            job: envelope.job.to_string(),
            what,
        });
    }
    // The relay pushes later than now: the job keeps the due time it has now.
    if let Some(Delay::After(after)) = envelope.delay {
        let after = chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX);
        let due = chrono::Utc::now()
            .checked_add_signed(after)
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
        envelope.delay = Some(Delay::At(due));
    }
    Ok(Link::sealed(queue, envelope)?)
}

impl Outbox {
    /// Inserts `links` and notifies the relays, in one statement; the notification is
    /// delivered when the transaction commits, and not at all if it rolls back.
    async fn insert(&self, conn: &mut PgConnection, links: &[Link]) -> Result<(), OutboxError> {
        if links.is_empty() {
            return Ok(());
        }
        let uuids: Vec<String> = links.iter().map(|l| l.uuid.to_string()).collect();
        let queues: Vec<&str> = links.iter().map(|l| l.queue.as_str()).collect();
        let jobs: Vec<&str> = links.iter().map(|l| l.job.as_str()).collect();
        let encoded: Vec<String> = links.iter().map(Link::encode).collect();
        let sql = format!(
            "WITH written AS (INSERT INTO {} (uuid, queue, job, link) \
             SELECT * FROM UNNEST($1::text[]::uuid[], $2::text[], $3::text[], $4::text[])) \
             SELECT pg_notify($5, '')",
            self.name()
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(uuids)
            .bind(queues)
            .bind(jobs)
            .bind(encoded)
            .bind(self.channel())
            .execute(conn)
            .await?;
        Ok(())
    }
}
