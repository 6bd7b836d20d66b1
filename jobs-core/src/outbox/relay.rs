//! The relay: moves committed outbox rows into Redis, each job once.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;

use crate::queue::RedisQueue;
use crate::workflow::Link;

use super::{Outbox, OutboxError};

/// Rows a relay claims per pass, unless set with [`Relay::batch`].
pub const DEFAULT_BATCH: usize = 500;
/// How often a relay looks for rows without a notification, unless set with [`Relay::poll`].
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// How long a job's push guard lasts, unless set with [`Relay::guard`].
pub const DEFAULT_GUARD: Duration = Duration::from_secs(900);

/// The longest pause after a failed pass, doubling from 100 ms.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Moves committed rows of an outbox into Redis. Any number of relays may run, in any
/// processes on any hosts: each claims rows no other relay holds.
///
/// A pass claims up to [`batch`](Self::batch) rows, oldest first (`FOR UPDATE SKIP LOCKED`),
/// pushes them in one pipeline, deletes them and commits. Each push is guarded by the job's
/// uuid for [`guard`](Self::guard): when a relay dies or loses PostgreSQL after its push and
/// before its commit, the rows come back and the next pass pushes nothing twice. A row is
/// pushed again, and its job run twice, only if its pass's commit fails and the rows stay
/// unclaimed longer than the guard.
#[derive(Debug, Clone)]
pub struct Relay {
    pool: PgPool,
    queue: RedisQueue,
    outbox: Outbox,
    batch: usize,
    poll: Duration,
    guard: Duration,
}

impl Relay {
    /// A relay of the default outbox in `pool`'s database into `queue`'s Redis.
    pub fn new(pool: PgPool, queue: RedisQueue) -> Relay {
        Relay {
            pool,
            queue,
            outbox: Outbox::default(),
            batch: DEFAULT_BATCH,
            poll: DEFAULT_POLL,
            guard: DEFAULT_GUARD,
        }
    }

    /// Relays `outbox` instead of the default one.
    pub fn outbox(mut self, outbox: Outbox) -> Relay {
        self.outbox = outbox;
        self
    }

    /// Claims at most `rows` rows per pass (at least 1).
    pub fn batch(mut self, rows: usize) -> Relay {
        self.batch = rows.max(1);
        self
    }

    /// Looks for rows this often when no notification comes.
    pub fn poll(mut self, every: Duration) -> Relay {
        self.poll = every;
        self
    }

    /// Keeps each job's push guard this long.
    pub fn guard(mut self, lasts: Duration) -> Relay {
        self.guard = lasts;
        self
    }

    /// One pass: claims committed rows, pushes their jobs (each unless it was pushed
    /// already), deletes the rows and commits. Returns how many rows it moved. On an error
    /// the claimed rows stay for the next pass.
    pub async fn relay_once(&self) -> Result<usize, OutboxError> {
        let mut tx = self.pool.begin().await?;
        let claim = format!(
            "SELECT id, link FROM {} ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
            self.outbox.name()
        );
        let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(claim))
            .bind(self.batch as i64)
            .fetch_all(&mut *tx)
            .await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let mut ids = Vec::with_capacity(rows.len());
        let mut links = Vec::with_capacity(rows.len());
        for (id, stored) in &rows {
            match Link::decode(stored) {
                Some(link) => {
                    ids.push(*id);
                    links.push(link);
                }
                // Left in the table, where an operator finds it; the others go on.
                None => tracing::error!(
                    table = self.outbox.name(),
                    id,
                    "an outbox row does not hold a job; it is left in the table"
                ),
            }
        }
        let pushed = self.queue.push_all_once(&links, self.guard).await?;
        let again = pushed.iter().filter(|now| !**now).count();
        if again > 0 {
            tracing::info!(
                jobs = again,
                "outbox rows pushed before (a relay stopped before its commit); not pushed again"
            );
        }
        let delete = format!("DELETE FROM {} WHERE id = ANY($1)", self.outbox.name());
        sqlx::query(sqlx::AssertSqlSafe(delete))
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(ids.len())
    }

    /// Relays until `stop` completes: a pass whenever a transaction that wrote rows commits
    /// (`LISTEN`), and every [`poll`](Self::poll) in any case; passes follow one another
    /// while they find full batches. A failed pass is logged and tried again after a pause
    /// (100 ms, doubling up to 5 s). Returns an error only when it cannot listen at start.
    pub async fn run_until(self, stop: impl Future<Output = ()>) -> Result<(), OutboxError> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(self.outbox.channel()).await?;
        tokio::pin!(stop);
        let mut pause = Duration::from_millis(100);
        loop {
            let wait = match self.drain().await {
                Ok(()) => {
                    pause = Duration::from_millis(100);
                    self.poll
                }
                Err(err) => {
                    tracing::warn!(error = %err, retry_in_s = pause.as_secs_f64(), "cannot relay the outbox");
                    let wait = pause;
                    pause = (pause * 2).min(MAX_PAUSE);
                    wait
                }
            };
            tokio::select! {
                () = &mut stop => return Ok(()),
                notified = listener.recv() => {
                    if let Err(err) = notified {
                        // The listener reconnects on its next call; the poll covers the gap.
                        tracing::warn!(error = %err, "the outbox's notifications were interrupted");
                        tokio::time::sleep(pause).await;
                    }
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Passes until one finds less than a full batch.
    async fn drain(&self) -> Result<(), OutboxError> {
        while self.relay_once().await? >= self.batch {}
        Ok(())
    }
}
