//! The outbox table: its name, its schema, and the statements on it.

use super::OutboxError;

/// Every column of the table, as this version reads and writes them.
pub(super) const COLUMNS: &str =
    "id, uuid, queue, job, link, unique_key, unique_ms, problem, created_at";

/// The table name [`Outbox::default`] uses.
pub const DEFAULT_TABLE: &str = "redjob_outbox";

/// An outbox table: where dispatches made in a transaction wait for a [`Relay`](super::Relay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbox {
    table: String,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            table: DEFAULT_TABLE.to_owned(),
        }
    }
}

impl Outbox {
    /// The outbox in `table`: a name such as `jobs_outbox`, or `schema.table`.
    pub fn table(table: &str) -> Result<Outbox, OutboxError> {
        let plain = |part: &str| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && part.len() <= 63
        };
        let parts: Vec<&str> = table.split('.').collect();
        // The name is also the notification channel, which PostgreSQL limits to 63 bytes.
        if parts.len() > 2 || !parts.iter().all(|part| plain(part)) || table.len() > 63 {
            return Err(OutboxError::InvalidTable(table.to_owned()));
        }
        Ok(Outbox {
            table: table.to_owned(),
        })
    }

    /// The table's name, as given.
    pub fn name(&self) -> &str {
        &self.table
    }

    /// The SQL that creates the table, for a migration of the application's own (it creates
    /// nothing that exists already).
    ///
    /// ```
    /// let sql = redjob::outbox::Outbox::default().schema();
    /// assert!(sql.starts_with("CREATE TABLE IF NOT EXISTS redjob_outbox"));
    /// ```
    pub fn schema(&self) -> String {
        let index = self.unqualified();
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (\n\
             \x20   -- The claim order: relays take the oldest rows first.\n\
             \x20   id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n\
             \x20   uuid uuid NOT NULL UNIQUE,\n\
             \x20   queue text NOT NULL,\n\
             \x20   job text NOT NULL,\n\
             \x20   -- The job as the relay pushes it: where it goes, when it is due, its payload.\n\
             \x20   link text NOT NULL,\n\
             \x20   -- A unique job's lock (`<job>:<unique id>`) and how long it lasts, in ms.\n\
             \x20   unique_key text,\n\
             \x20   unique_ms bigint,\n\
             \x20   -- Why the relay left the row: a duplicate of a unique job, or not a job.\n\
             \x20   problem text,\n\
             \x20   created_at timestamptz NOT NULL DEFAULT now()\n\
             );\n\
             -- The rows relays claim: deleted rows and kept ones are not scanned past.\n\
             CREATE INDEX IF NOT EXISTS {index}_claim ON {table} (id) WHERE problem IS NULL;\n",
            table = self.table,
        )
    }

    /// Creates the table through `executor` (a pool, a connection or a transaction) unless it
    /// exists: for a program that runs no migrations of its own. Otherwise put
    /// [`schema`](Self::schema) in a migration.
    ///
    /// Any number of processes may call it at once (an API and its workers starting
    /// together): each takes a transaction-level advisory lock on a key derived from the
    /// table's name (`pg_advisory_xact_lock(hashtext(...))`) before the schema, so one creates the table and
    /// the others, waiting behind it, find it. Through a transaction of the caller's, the lock
    /// is held until that transaction ends.
    pub async fn create_table<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
    ) -> Result<(), OutboxError> {
        // `IF NOT EXISTS` alone races: two sessions both find no table, and the second fails
        // on the catalog's unique index. The statements go as one simple query, which
        // PostgreSQL runs as one transaction (or inside the caller's), so the lock is held
        // until the schema is committed. The key is the server's hash of the table's name
        // without its schema (a plain name, checked by `Outbox::table`), lowercased as
        // PostgreSQL folds it: every process on that server takes the same one.
        let locked = format!(
            "SELECT pg_advisory_xact_lock(hashtext('redjob outbox {}'));\n{}",
            self.unqualified().to_ascii_lowercase(),
            self.schema()
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(locked))
            .execute(executor)
            .await?;
        Ok(())
    }

    /// The table's name without its schema.
    fn unqualified(&self) -> &str {
        self.table.rsplit('.').next().unwrap_or(&self.table)
    }

    /// The channel a commit notifies and relays listen on: the table's name.
    pub(crate) fn channel(&self) -> &str {
        &self.table
    }
}
