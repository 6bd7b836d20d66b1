//! Dispatch that commits with the caller's PostgreSQL transaction (feature `postgres`): a job
//! exists if and only if the transaction that dispatched it commits.
//!
//! A dispatch made [`in_transaction`](crate::PendingDispatch::in_transaction) writes the job,
//! built and signed as a push would send it, into an outbox table, in the caller's transaction,
//! and touches nothing else. A [`Relay`] moves committed rows into Redis: it claims them with
//! `FOR UPDATE SKIP LOCKED`, pushes them, deletes them and commits. Each push is guarded by the
//! job's uuid (`queues:<name>:pushed:<uuid>`, as long as [`Relay::guard`]), so a relay that dies
//! between its push and its commit leaves rows that the next relay pushes again as no-ops.
//! Relays wake on `LISTEN/NOTIFY` at commit, and poll as a fallback for notifications missed
//! while they were not listening.
//!
//! ```no_run
//! use redjob::outbox::{Outbox, Relay};
//! use redjob::{job, Job, JobContext, JobResult, RedisQueue};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendConfirmation { order: i64 }
//!
//! #[job]
//! impl Job for SendConfirmation {
//!     async fn handle(&self, _ctx: &JobContext) -> JobResult { Ok(()) }
//! }
//!
//! # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! Outbox::default().create_table(&pool).await?; // or Outbox::schema() in a migration
//!
//! let mut tx = pool.begin().await?;
//! sqlx::query("INSERT INTO orders (id) VALUES (7)").execute(&mut *tx).await?;
//! SendConfirmation { order: 7 }.dispatch().in_transaction(&mut tx).await?;
//! tx.commit().await?; // the job exists from here on, and not before
//!
//! // In a worker (or any process): move committed rows into Redis until stopped.
//! let relay = Relay::new(pool.clone(), RedisQueue::from_env()?);
//! relay.run_until(std::future::pending::<()>()).await;
//! # Ok(())
//! # }
//! ```
//!
//! A unique job takes its lock when a relay pushes it; one whose lock another job holds then is
//! not pushed, and its row is kept with the reason in its `problem` column. Not yet carried by
//! the outbox: debounced jobs, whose dispatch in a transaction fails with
//! [`OutboxError::Unsupported`] rather than push them outside it, and chains and batches,
//! refused with [`OutboxError::Workflow`].

pub(crate) mod offline;
mod relay;
mod report;
mod status;
mod table;
mod write;

pub use relay::{Relay, DEFAULT_BATCH, DEFAULT_GUARD, DEFAULT_POLL};
pub use table::{Outbox, DEFAULT_TABLE};

/// Why an outbox write or a relay pass failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// PostgreSQL refused or failed the statement.
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] sqlx::Error),
    /// The job could not be built or pushed (a payload too large, Redis unreachable, ...).
    #[error(transparent)]
    Queue(#[from] crate::Error),
    /// The dispatch uses something the outbox does not carry yet.
    #[error(
        "{job}: {what} cannot be dispatched in a transaction yet; dispatch it after the commit"
    )]
    Unsupported {
        /// The job's name.
        job: String,
        /// What it uses: "a debounced job".
        what: &'static str,
    },
    /// A chain or a batch (`what` names which): the outbox does not carry workflows yet.
    #[error(
        "{what} cannot be dispatched in a transaction yet: a relay pushes one job at a time, \
         and a workflow's records are kept in Redis in the step that pushes its first jobs; \
         dispatch it after the commit"
    )]
    Workflow {
        /// "a chain" or "a batch".
        what: &'static str,
    },
    /// The outbox's table does not exist, or lacks columns this version uses: its migration
    /// has not run.
    #[error("the outbox table {table} is missing or out of date ({reason}): create it with Outbox::schema() in a migration, or Outbox::create_table")]
    TableMissing {
        /// The table's name.
        table: String,
        /// What PostgreSQL said.
        reason: String,
    },
    /// A handle that talks to no Redis and keeps no record of transactions was given a
    /// dispatch in a transaction: nothing was written.
    #[error("this handle talks to no Redis and records no dispatch in a transaction; nothing was written")]
    Offline,
    /// A fake queue was given a dispatch in a transaction before it could see transactions
    /// end: nothing was written.
    #[error("a fake queue records a dispatch in a transaction when the transaction commits, and needs the database to see that: call fake.transactions_in(&pool) first; nothing was written")]
    FakeWithoutDatabase,
    /// The outbox's table name is not a plain SQL name.
    #[error(
        "invalid outbox table name {0:?}: use letters, digits and _, as table or schema.table"
    )]
    InvalidTable(String),
}
