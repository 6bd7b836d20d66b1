//! Dispatches a fake queue takes in a PostgreSQL transaction (feature `postgres`): each counts
//! as pushed once its transaction commits, and never if the transaction, or the savepoint it
//! was made in, rolls back.
//!
//! Nothing goes into an outbox table. The dispatch writes one row per job into a temporary
//! table of the transaction's own session (`pg_temp.redjob_fake_outbox`, emptied at each
//! commit), which no other session, so no relay, can see. The row's `xmin` is the id of the
//! (sub)transaction that wrote it; the fake keeps the job with that id until PostgreSQL says
//! what became of it (`pg_xact_status`): committed, rolled back, or still open. The fake asks
//! on a connection of its own, from a thread of its own, so that its assertions, which are not
//! async, can ask too.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

use crate::outbox::OutboxError;
use crate::queue::Envelope;

/// Creates the session's table of dispatches unless it exists. A plain `IF NOT EXISTS` would
/// send a notice on every dispatch after the first.
const CREATE: &str = "DO $$ BEGIN \
    IF to_regclass('pg_temp.redjob_fake_outbox') IS NULL THEN \
    CREATE TEMPORARY TABLE redjob_fake_outbox (uuid uuid NOT NULL) ON COMMIT DELETE ROWS; \
    END IF; END $$";

/// Writes the jobs' uuids; answers the (sub)transaction that wrote them (`xmin`, 32 bits) and
/// its top-level transaction's full id, from which the full id of the first is made.
const WRITE: &str = "INSERT INTO pg_temp.redjob_fake_outbox (uuid) \
    SELECT * FROM UNNEST($1::text[]::uuid[]) \
    RETURNING xmin::text::bigint, pg_current_xact_id()::text::bigint";

/// What PostgreSQL says of each transaction, by its full id, in the order asked.
const STATUS: &str = "SELECT pg_xact_status(id::xid8) FROM UNNEST($1::text[]) \
    WITH ORDINALITY AS asked(id, at) ORDER BY at";

/// The jobs the current transaction of a connection holds.
const HELD: &str = "SELECT uuid::text FROM pg_temp.redjob_fake_outbox";

/// How long a fake waits for PostgreSQL to say what became of its transactions.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// The dispatches a fake took in transactions, until their transactions end.
#[derive(Default)]
pub(crate) struct Transactions {
    /// Each dispatch's jobs, with the (sub)transaction that holds them, oldest first.
    open: Mutex<Vec<Held>>,
    /// Asks PostgreSQL, once the fake is given the database.
    asker: OnceLock<Asker>,
}

/// Jobs one dispatch wrote in a (sub)transaction.
struct Held {
    transaction: u64,
    envelopes: Vec<Envelope>,
}

/// What became of a transaction, as far as the fake knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Committed,
    RolledBack,
    Open,
}

impl Transactions {
    /// Lets the fake ask `pool`'s database what became of its transactions.
    pub(crate) fn watch(&self, pool: &PgPool) {
        let options = (*pool.connect_options()).clone();
        self.asker.get_or_init(|| Asker::start(options));
    }

    /// Takes `envelopes`, dispatched through `conn`: they wait for its transaction to end.
    pub(crate) async fn write(
        &self,
        conn: &mut PgConnection,
        envelopes: Vec<Envelope>,
    ) -> Result<(), OutboxError> {
        if self.asker.get().is_none() {
            return Err(OutboxError::FakeWithoutDatabase);
        }
        if envelopes.is_empty() {
            return Ok(());
        }
        sqlx::raw_sql(CREATE).execute(&mut *conn).await?;
        let uuids: Vec<String> = envelopes.iter().map(|e| e.uuid.to_string()).collect();
        let (written, top): (i64, i64) = sqlx::query_as(WRITE)
            .bind(&uuids)
            .fetch_one(&mut *conn)
            .await?;
        let transaction = full_id(written as u32, top as u64);
        self.open().push(Held {
            transaction,
            envelopes,
        });
        Ok(())
    }

    /// Takes out the jobs whose transactions have committed, oldest first, and drops those
    /// whose transactions rolled back; jobs of open transactions stay.
    ///
    /// # Panics
    ///
    /// When PostgreSQL cannot be asked: a fake cannot tell what was dispatched.
    pub(crate) fn take_committed(&self) -> Vec<Envelope> {
        let asked: Vec<u64> = self.open().iter().map(|held| held.transaction).collect();
        if asked.is_empty() {
            return Vec::new();
        }
        let asker = self
            .asker
            .get()
            .expect("jobs are held only once the fake can ask");
        let ended = asker.ask(&asked).unwrap_or_else(|why| {
            panic!("the fake cannot ask PostgreSQL whether its transactions committed: {why}")
        });
        let mut open = self.open();
        let mut committed = Vec::new();
        if open.len() < asked.len() {
            // Cleared while PostgreSQL was asked: nothing asked about is left to record.
            return committed;
        }
        // Jobs written since the question stay, unasked.
        let answered: Vec<Held> = open.drain(..asked.len()).collect();
        let mut kept: Vec<Held> = Vec::new();
        for (held, ended) in answered.into_iter().zip(ended) {
            match ended {
                Ended::Committed => committed.extend(held.envelopes),
                Ended::RolledBack => {}
                Ended::Open => kept.push(held),
            }
        }
        kept.append(&mut open);
        *open = kept;
        committed
    }

    /// The uuids of the jobs `conn`'s current transaction holds, in the order written.
    pub(crate) async fn held_by(conn: &mut PgConnection) -> Result<Vec<Uuid>, sqlx::Error> {
        let exists: Option<String> =
            sqlx::query_scalar("SELECT to_regclass('pg_temp.redjob_fake_outbox')::text")
                .fetch_one(&mut *conn)
                .await?;
        if exists.is_none() {
            return Ok(Vec::new());
        }
        let held: Vec<String> = sqlx::query_scalar(HELD).fetch_all(&mut *conn).await?;
        Ok(held.iter().filter_map(|uuid| uuid.parse().ok()).collect())
    }

    /// The jobs still waiting for their transactions, whose uuids are among `uuids`.
    pub(crate) fn waiting(&self, uuids: &[Uuid]) -> Vec<Envelope> {
        let open = self.open();
        let envelopes = open.iter().flat_map(|held| &held.envelopes);
        envelopes
            .filter(|envelope| uuids.contains(&envelope.uuid))
            .cloned()
            .collect()
    }

    /// How many jobs wait for their transactions to end, as far as the fake last asked.
    pub(crate) fn waiting_count(&self) -> usize {
        self.open().iter().map(|held| held.envelopes.len()).sum()
    }

    /// Forgets every job waiting for its transaction.
    pub(crate) fn clear(&self) {
        self.open().clear();
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Vec<Held>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The full (64-bit) id of a transaction whose 32-bit id is `xid`, begun in, or as, the
/// top-level transaction `top`: a subtransaction's id is assigned after its parent's.
fn full_id(xid: u32, top: u64) -> u64 {
    top + u64::from(xid.wrapping_sub(top as u32))
}

/// A question to the asking thread: the transactions, and where to answer.
type Question = (Vec<u64>, mpsc::SyncSender<Result<Vec<Ended>, String>>);

/// Asks PostgreSQL what became of transactions, on a connection of its own that lives on a
/// thread of its own: the fake's assertions wait for the answer without a runtime, and the
/// test's runtime may be the single thread they block. The thread ends with the fake.
struct Asker {
    questions: Mutex<mpsc::Sender<Question>>,
}

impl Asker {
    fn start(options: PgConnectOptions) -> Asker {
        let (questions, asked) = mpsc::channel::<Question>();
        std::thread::Builder::new()
            .name("redjob-fake-transactions".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the fake's connection");
                let mut conn: Option<PgConnection> = None;
                for (transactions, answer) in asked {
                    let ended = runtime.block_on(ask(&mut conn, &options, &transactions));
                    if ended.is_err() {
                        conn = None;
                    }
                    let _ = answer.send(ended.map_err(|err| err.to_string()));
                }
            })
            .expect("a thread for the fake's connection");
        Asker {
            questions: Mutex::new(questions),
        }
    }

    /// What became of each of `transactions`.
    fn ask(&self, transactions: &[u64]) -> Result<Vec<Ended>, String> {
        let (answer, answered) = mpsc::sync_channel(1);
        self.questions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((transactions.to_vec(), answer))
            .map_err(|_| "its connection's thread has ended".to_owned())?;
        answered
            .recv_timeout(ASK_TIMEOUT)
            .map_err(|_| format!("no answer within {ASK_TIMEOUT:?}"))?
    }
}

/// Asks on `conn`, connecting it first when it is not.
async fn ask(
    conn: &mut Option<PgConnection>,
    options: &PgConnectOptions,
    transactions: &[u64],
) -> Result<Vec<Ended>, sqlx::Error> {
    if conn.is_none() {
        *conn = Some(PgConnection::connect_with(options).await?);
    }
    let conn = conn.as_mut().expect("connected above");
    let ids: Vec<String> = transactions.iter().map(u64::to_string).collect();
    let states: Vec<Option<String>> = sqlx::query_scalar(STATUS).bind(ids).fetch_all(conn).await?;
    Ok(states
        .into_iter()
        .map(|state| match state.as_deref() {
            Some("committed") => Ended::Committed,
            Some("in progress") => Ended::Open,
            // "aborted", or too old for PostgreSQL to remember, which a test never waits for.
            _ => Ended::RolledBack,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::full_id;

    #[test]
    fn a_subtransactions_full_id_follows_its_parents_epoch() {
        assert_eq!(full_id(100, 100), 100);
        assert_eq!(full_id(105, (3 << 32) + 100), (3 << 32) + 105);
        // The subtransaction's id wrapped past 2^32 after its parent's.
        assert_eq!(full_id(2, (3 << 32) + u64::from(u32::MAX)), (4 << 32) + 2);
    }
}
