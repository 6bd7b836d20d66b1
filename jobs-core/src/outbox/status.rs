//! Measuring an outbox table for operators: rows waiting, rows kept, the oldest waiting row.

use chrono::{DateTime, Utc};

use crate::admin::OutboxStatus;

use super::{Outbox, OutboxError};

impl Outbox {
    /// Measures the table through `executor` (a pool, a connection or a transaction): the
    /// committed rows waiting for a relay, the rows kept with a problem, and when the oldest
    /// waiting row was written. One statement; it counts every row, so it costs a scan of a
    /// table that is small while relays keep up.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), redjob::outbox::OutboxError> {
    /// let status = redjob::outbox::Outbox::default().status(&pool).await?;
    /// println!("{} waiting, relays {:?} behind", status.waiting, status.lag());
    /// # Ok(()) }
    /// ```
    pub async fn status<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
    ) -> Result<OutboxStatus, OutboxError> {
        let table = self.name();
        let measure = format!(
            "SELECT count(*) FILTER (WHERE problem IS NULL), \
                    count(*) FILTER (WHERE problem IS NOT NULL), \
                    (SELECT created_at FROM {table} WHERE problem IS NULL ORDER BY id LIMIT 1), \
                    clock_timestamp() \
             FROM {table}"
        );
        let (waiting, kept, oldest_waiting_at, measured_at): (
            i64,
            i64,
            Option<DateTime<Utc>>,
            DateTime<Utc>,
        ) = sqlx::query_as(sqlx::AssertSqlSafe(measure))
            .fetch_one(executor)
            .await
            .map_err(|err| self.missing_or(err))?;
        Ok(OutboxStatus {
            table: table.to_owned(),
            waiting: waiting.max(0) as u64,
            kept: kept.max(0) as u64,
            oldest_waiting_at,
            measured_at,
        })
    }

    /// [`OutboxError::TableMissing`] when PostgreSQL says the table or a column is missing;
    /// the error as it is otherwise.
    pub(super) fn missing_or(&self, err: sqlx::Error) -> OutboxError {
        match err {
            // 42P01: undefined table; 42703: undefined column.
            sqlx::Error::Database(err)
                if matches!(err.code().as_deref(), Some("42P01" | "42703")) =>
            {
                OutboxError::TableMissing {
                    table: self.name().to_owned(),
                    reason: err.message().to_owned(),
                }
            }
            err => err.into(),
        }
    }
}
