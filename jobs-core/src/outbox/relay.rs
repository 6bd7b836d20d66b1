//! The relay: moves committed outbox rows into Redis, each job once.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;

use crate::queue::durability::Durability;
use crate::queue::keys::KeyLayout;
use crate::queue::{delay_from_due, scripts, RedisQueue, StatusStart};
use crate::workflow::Link;

use super::report::Reporter;
use super::table::COLUMNS;
use super::write::{Row, UniqueLockRow};
use super::{Outbox, OutboxError};

/// Rows a relay claims per pass, unless set with [`Relay::batch`].
pub const DEFAULT_BATCH: usize = 500;
/// How often a relay looks for rows without a notification, unless set with [`Relay::poll`].
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// How long a job's push guard lasts, unless set with [`Relay::guard`].
pub const DEFAULT_GUARD: Duration = Duration::from_secs(900);

/// How a pass begins its transaction. A relay that dies in the middle of a pass (its host
/// gone, no FIN) would hold its rows until TCP keepalive noticed, hours later and past their
/// guards; PostgreSQL ends a transaction idle (waiting for Redis) this long instead: far below
/// the guard, far above a push's command timeout.
const BEGIN_PASS: &str = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = '60s'";

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
/// unclaimed longer than the guard: PostgreSQL ends a pass's transaction that sits idle for a
/// minute (a relay whose host vanished), so its rows come back well within it.
///
/// A worker given a relay checks its table before its first job and logs through its own
/// output. A program that runs a relay itself does both: it calls [`check`](Self::check)
/// first, since [`run_until`](Self::run_until) does not ask and a relay without its table only
/// logs each failed pass, forever; and it installs a `tracing` subscriber (the worker's is
/// `redjob_worker::logging::init`), without which none of the relay's lines is shown.
///
/// ```no_run
/// use redjob::outbox::{OutboxError, Relay};
///
/// # async fn demo(pool: sqlx::PgPool, queue: redjob::RedisQueue) -> Result<(), OutboxError> {
/// // A tracing subscriber is installed first, for the relay's lines.
/// let relay = Relay::new(pool, queue);
/// match relay.check().await {
///     Ok(()) => {}
///     // The migration has not run: a setting to fix, not something to wait out.
///     Err(missing @ OutboxError::TableMissing { .. }) => return Err(missing),
///     // PostgreSQL not reachable yet: the relay's passes retry.
///     Err(err) => tracing::warn!(error = %err, "cannot check the outbox table; relaying anyway"),
/// }
/// relay.run_until(std::future::pending::<()>()).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Relay {
    pool: PgPool,
    queue: RedisQueue,
    outbox: Outbox,
    batch: usize,
    poll: Duration,
    guard: Duration,
    durability: Durability,
}

impl Relay {
    /// A relay of the default outbox in `pool`'s database into `queue`'s Redis.
    pub fn new(pool: PgPool, queue: RedisQueue) -> Relay {
        let queue_durability = queue.config().durability;
        Relay {
            pool,
            queue,
            outbox: Outbox::default(),
            batch: DEFAULT_BATCH,
            poll: DEFAULT_POLL,
            guard: DEFAULT_GUARD,
            durability: queue_durability,
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

    /// Keeps each job's push guard this long (at least a second).
    pub fn guard(mut self, lasts: Duration) -> Relay {
        self.guard = lasts.max(Duration::from_secs(1));
        self
    }

    /// Deletes a pass's rows only once `durability.replicas` replicas have their jobs (one
    /// `WAIT` per pass), so that a relayed job survives a failover exactly once. Default: the
    /// queue handle's [`QueueConfig::durability`](crate::QueueConfig::durability).
    pub fn durability(mut self, durability: Durability) -> Relay {
        self.durability = durability;
        self
    }

    /// Checks that the outbox table exists with every column this version reads and writes:
    /// [`OutboxError::TableMissing`] when it does not, another error when PostgreSQL cannot
    /// be asked.
    pub async fn check(&self) -> Result<(), OutboxError> {
        let table = self.outbox.name();
        let probe = format!("SELECT {COLUMNS} FROM {table} LIMIT 0");
        sqlx::query(sqlx::AssertSqlSafe(probe))
            .execute(&self.pool)
            .await
            .map_err(|err| self.outbox.missing_or(err))?;
        Ok(())
    }

    /// One pass: claims committed rows, pushes their jobs (each unless it was pushed
    /// already), deletes the rows pushed, marks the others with their problem, and commits.
    /// Returns how many rows it claimed. On an error the claimed rows stay for the next pass.
    pub async fn relay_once(&self) -> Result<usize, OutboxError> {
        Ok(self.pass().await?.claimed())
    }

    /// [`Relay::relay_once`], saying what became of the rows claimed.
    async fn pass(&self) -> Result<Pass, OutboxError> {
        let mut tx = self.pool.begin_with(BEGIN_PASS).await?;
        let table = self.outbox.name();
        let claim = format!(
            "SELECT id, link, unique_key, unique_ms FROM {table} WHERE problem IS NULL \
             ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"
        );
        let rows: Vec<(i64, String, Option<String>, Option<i64>)> =
            sqlx::query_as(sqlx::AssertSqlSafe(claim))
                .bind(self.batch as i64)
                .fetch_all(&mut *tx)
                .await?;
        if rows.is_empty() {
            return Ok(Pass::default());
        }
        let mut claimed = Vec::with_capacity(rows.len());
        let mut problems: Vec<(i64, String)> = Vec::new();
        for (id, stored, unique_key, unique_ms) in rows {
            match Link::decode(&stored) {
                Some(link) => claimed.push(Claimed {
                    id,
                    row: Row {
                        link,
                        unique: unique_key
                            .zip(unique_ms)
                            .map(|(key, lasts_ms)| UniqueLockRow { key, lasts_ms }),
                    },
                }),
                None => {
                    tracing::error!(
                        table,
                        id,
                        "an outbox row does not hold a job; it is marked and left"
                    );
                    problems.push((
                        id,
                        "not a job: the row does not hold a job as the relay pushes it".into(),
                    ));
                }
            }
        }
        let outcomes = self.push(&mut claimed).await?;
        let mut done = Vec::with_capacity(claimed.len());
        for (row, outcome) in claimed.iter().zip(outcomes) {
            match outcome.problem() {
                None => done.push(row.id),
                Some(problem) => {
                    tracing::warn!(
                        table,
                        id = row.id,
                        job = %row.row.link.job,
                        uuid = %row.row.link.uuid,
                        problem,
                        "a job from the outbox was not pushed; its row is kept"
                    );
                    problems.push((row.id, problem));
                }
            }
        }
        let pass = Pass {
            relayed: done.len(),
            kept: problems.len(),
        };
        if !problems.is_empty() {
            let (ids, reasons): (Vec<i64>, Vec<String>) = problems.into_iter().unzip();
            let mark = format!(
                "UPDATE {table} SET problem = p.reason FROM UNNEST($1::bigint[], $2::text[]) \
                 AS p(id, reason) WHERE {table}.id = p.id"
            );
            sqlx::query(sqlx::AssertSqlSafe(mark))
                .bind(&ids)
                .bind(&reasons)
                .execute(&mut *tx)
                .await?;
        }
        if !done.is_empty() {
            let delete = format!("DELETE FROM {table} WHERE id = ANY($1)");
            sqlx::query(sqlx::AssertSqlSafe(delete))
                .bind(&done)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(pass)
    }

    /// Pushes the claimed rows' jobs, each unless it was pushed before: one pipeline per queue
    /// on a cluster (the rows sorted by queue first, keeping their order within each), one
    /// in all on a single server. A tracked job's status record starts as it is pushed: in the
    /// same script call on one server; on a cluster, where the record is in a slot of its own,
    /// in a call that follows the pushes, for the jobs pushed now. What became of each row, in
    /// the rows' order.
    ///
    /// With a [`durability`](Self::durability), every push of the pass, and the push guards of
    /// the jobs found pushed before (touched, so that the `WAIT` covers them too), must reach
    /// that many replicas before the rows are deleted; otherwise the pass fails
    /// ([`Error::NotDurable`](crate::Error::NotDurable)), the rows stay, and the next pass
    /// finds their jobs pushed and waits for the replicas again.
    async fn push(&self, claimed: &mut [Claimed]) -> Result<Vec<Pushed>, OutboxError> {
        let (outcomes, confirmation) = self
            .queue
            .durably(self.durability, |lane| self.push_on(lane, claimed))
            .await?;
        if let Err(mut not_durable) = confirmation {
            not_durable.jobs = claimed.iter().map(|c| c.row.link.uuid).collect();
            return Err(crate::Error::NotDurable(not_durable).into());
        }
        let before = outcomes
            .iter()
            .filter(|o| matches!(o, Pushed::Before))
            .count();
        if before > 0 {
            tracing::info!(
                jobs = before,
                "outbox rows pushed before (a relay stopped before its commit); not pushed again"
            );
        }
        Ok(outcomes)
    }

    /// [`Relay::push`]'s writes, through `lane`.
    async fn push_on(
        &self,
        lane: RedisQueue,
        claimed: &mut [Claimed],
    ) -> crate::Result<Vec<Pushed>> {
        let mut outcomes = Vec::with_capacity(claimed.len());
        let layout = self.queue.layout();
        let runs: Vec<&[Claimed]> = match layout {
            KeyLayout::Standalone => vec![claimed],
            KeyLayout::Cluster => {
                claimed.sort_by(|a, b| a.row.link.queue.cmp(&b.row.link.queue));
                claimed
                    .chunk_by(|a, b| a.row.link.queue == b.row.link.queue)
                    .collect()
            }
        };
        let mut records = Vec::new();
        for run in runs {
            let starts: Vec<Option<StatusStart>> = run
                .iter()
                .map(|claimed| self.status_start(&claimed.row.link))
                .collect();
            let mut calls = Vec::with_capacity(run.len());
            for (claimed, start) in run.iter().zip(&starts) {
                let with_push = start.as_ref().filter(|_| layout == KeyLayout::Standalone);
                calls.push(self.call(&claimed.row, with_push));
            }
            let uses = |unique: bool| run.iter().any(|c| c.row.unique.is_some() == unique);
            let scripts: Vec<&redis::Script> = [
                (&*scripts::PUSH_ONCE, uses(false)),
                (&*scripts::PUSH_UNIQUE_ONCE, uses(true)),
            ]
            .into_iter()
            .filter_map(|(script, used)| used.then_some(script))
            .collect();
            let replies = lane.invoke_each(&scripts, &calls).await?;
            let pushed: Vec<Pushed> = replies.into_iter().map(Pushed::from_reply).collect();
            if layout == KeyLayout::Cluster {
                for (start, pushed) in starts.iter().zip(&pushed) {
                    if let (Some(start), Pushed::Now) = (start, pushed) {
                        let mut call = scripts::TRACK.key(&start.record);
                        start.add_args(&mut call);
                        records.push(call);
                    }
                }
            }
            outcomes.extend(pushed);
        }
        // Each record in its own slot: a call each, as a direct push makes them.
        for record in &records {
            lane.invoke::<u64>(record).await?;
        }
        if !self.durability.is_none() {
            // A write on the lane comes after the earlier pass's push in the replication
            // stream, so the WAIT that follows covers that push too; each guard's own, for
            // its shard on a cluster.
            for (claimed, outcome) in claimed.iter().zip(&outcomes) {
                if matches!(outcome, Pushed::Before) {
                    let link = &claimed.row.link;
                    let guard = self
                        .queue
                        .keys()
                        .pushed(&link.queue, &link.uuid.to_string());
                    let touch = redis::cmd("PEXPIRE")
                        .arg(guard)
                        .arg(self.guard.as_millis() as u64)
                        .to_owned();
                    lane.query::<i64>(&touch).await?;
                }
            }
        }
        Ok(outcomes)
    }

    /// The status record a row's job starts with as it is pushed, when it is tracked.
    fn status_start(&self, link: &Link) -> Option<StatusStart> {
        #[derive(serde::Deserialize)]
        struct Tracking {
            track: Option<u64>,
        }
        // Most jobs are not tracked: their payloads are not read.
        if !link.payload.contains("\"track\":") {
            return None;
        }
        let tracking: Tracking = serde_json::from_str(&link.payload).ok()?;
        tracking.track?;
        let delay = delay_from_due(&link.due);
        Some(
            self.queue
                .status_start(&link.uuid, &link.queue, &link.job, delay),
        )
    }

    /// The script call that pushes a row's job once, taking a unique job's lock with it, and
    /// starting its status record with it when `record` is given.
    fn call(&self, row: &Row, record: Option<&StatusStart>) -> redis::ScriptInvocation<'static> {
        let mut call = match &row.unique {
            None => self.queue.push_once_call(&row.link, self.guard),
            Some(lock) => {
                self.queue
                    .push_unique_once_call(&row.link, &lock.key, lock.lasts_ms, self.guard)
            }
        };
        if let Some(record) = record {
            call.key(&record.record);
            record.add_args(&mut call);
        }
        call
    }

    /// Relays until `stop` completes: a pass whenever a transaction that wrote rows commits
    /// (`LISTEN`), and every [`poll`](Self::poll) in any case; passes follow one another
    /// while they find full batches, and `stop` is heeded between any two. A failed pass, or
    /// a listener that cannot connect, is logged and tried again after a pause (100 ms,
    /// doubling up to 5 s); until the listener connects, the poll alone finds the rows.
    ///
    /// While it runs, the relay keeps a record of itself in Redis, refreshed every
    /// [`RELAY_REPORT_EVERY`](crate::admin::RELAY_REPORT_EVERY) with a measure of its table
    /// ([`Outbox::status`]), for `jobsctl outbox`, the dashboard and the Prometheus gauges
    /// ([`Admin::outbox_relays`](crate::admin::Admin::outbox_relays)); it removes the record
    /// when it stops.
    ///
    /// It logs one line at info level when it starts (`outbox relay started`: the table, the
    /// batch, and what wakes it) and one when it stops (`outbox relay stopped`, with the rows
    /// it relayed and kept); a worker's log output shows them, a program of its own installs
    /// a `tracing` subscriber for them.
    pub async fn run_until(self, stop: impl Future<Output = ()>) {
        let mut reporter = Reporter::new(&self.queue, self.outbox.name());
        self.relay_until(stop, &mut reporter).await;
        reporter.remove().await;
        let (relayed, kept) = reporter.counted();
        tracing::info!(
            table = self.outbox.name(),
            relayed,
            kept,
            "outbox relay stopped"
        );
    }

    async fn relay_until(&self, stop: impl Future<Output = ()>, reporter: &mut Reporter) {
        tokio::pin!(stop);
        let mut listener: Option<PgListener> = None;
        let mut pause = Duration::from_millis(100);
        let mut announced = false;
        loop {
            if listener.is_none() {
                match self.listen().await {
                    Ok(listening) => listener = Some(listening),
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot listen for the outbox's commits; polling")
                    }
                }
            }
            // After the first attempt to listen, so that the line says what wakes the relay.
            if !announced {
                announced = true;
                self.announce(listener.is_some());
            }
            let passed = self.pass().await;
            if let Ok(pass) = &passed {
                reporter.count(pass.relayed, pass.kept);
            }
            reporter.report_if_due(&self.pool, &self.outbox).await;
            let failed = match passed.map(|pass| pass.claimed()) {
                Ok(claimed) if claimed >= self.batch => {
                    // A full batch: more rows are likely waiting; pass again unless stopped.
                    tokio::select! {
                        biased;
                        () = &mut stop => return,
                        () = std::future::ready(()) => continue,
                    }
                }
                Ok(_) => false,
                Err(err) => {
                    tracing::warn!(error = %err, retry_in_s = pause.as_secs_f64(), "cannot relay the outbox");
                    true
                }
            };
            let wait = (if failed { pause } else { self.poll }).min(reporter.due_in());
            pause = if failed {
                (pause * 2).min(MAX_PAUSE)
            } else {
                Duration::from_millis(100)
            };
            match (failed, listener.as_mut()) {
                (false, Some(listening)) => tokio::select! {
                    () = &mut stop => return,
                    notified = listening.recv() => match notified {
                        // One pass serves every commit notified so far.
                        Ok(_) => while listening.next_buffered().is_some() {},
                        Err(err) => {
                            tracing::warn!(error = %err, "the outbox's notifications were interrupted; listening again");
                            listener = None;
                        }
                    },
                    () = tokio::time::sleep(wait) => {}
                },
                // After a failure notifications do not cut the pause short; without a
                // listener the poll alone finds the rows.
                _ => tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(wait) => {}
                },
            }
        }
    }

    /// Logs the start: the table, the batch, and what wakes the relay (`listening`: whether
    /// it listens on the table's channel yet, besides its poll).
    fn announce(&self, listening: bool) {
        let channel = self.outbox.channel();
        let poll_ms = u64::try_from(self.poll.as_millis()).unwrap_or(u64::MAX);
        let woken = if listening {
            format!("LISTEN {channel}, and a poll every {poll_ms} ms")
        } else {
            format!("a poll every {poll_ms} ms (LISTEN {channel} tried again after each pass)")
        };
        tracing::info!(
            table = self.outbox.name(),
            batch = self.batch,
            listening,
            poll_ms,
            woken = %woken,
            "outbox relay started"
        );
    }

    /// A listener on the outbox's channel.
    async fn listen(&self) -> Result<PgListener, OutboxError> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(self.outbox.channel()).await?;
        Ok(listener)
    }
}

/// What one pass did with the rows it claimed: each was relayed or kept.
#[derive(Debug, Default)]
struct Pass {
    /// Rows whose jobs were pushed (or found pushed already), deleted.
    relayed: usize,
    /// Rows kept with their problem.
    kept: usize,
}

impl Pass {
    /// Rows claimed.
    fn claimed(&self) -> usize {
        self.relayed + self.kept
    }
}

/// A row a pass claimed, and its id.
struct Claimed {
    id: i64,
    row: Row,
}

/// What became of a claimed row's job.
enum Pushed {
    /// Pushed by this pass.
    Now,
    /// Pushed by an earlier pass whose commit did not happen.
    Before,
    /// Not pushed: a unique job whose lock another job (this uuid) holds.
    Duplicate(String),
    /// Not pushed: Redis refused the call, saying this.
    Refused(String),
}

impl Pushed {
    /// Why the job was not pushed, as its row keeps it; `None` when it was.
    fn problem(self) -> Option<String> {
        match self {
            Pushed::Now | Pushed::Before => None,
            Pushed::Refused(why) => Some(format!("refused by Redis: {why}")),
            Pushed::Duplicate(holder) => {
                Some(format!("duplicate: job {holder} holds its unique lock"))
            }
        }
    }

    /// `push_once.lua` answers 1 or 0; `push_unique_once.lua` '' or the lock's holder; a
    /// call Redis refused, its error.
    fn from_reply(reply: redis::RedisResult<redis::Value>) -> Pushed {
        match reply {
            Ok(redis::Value::Int(0)) => Pushed::Before,
            Ok(redis::Value::BulkString(holder)) if !holder.is_empty() => {
                Pushed::Duplicate(String::from_utf8_lossy(&holder).into_owned())
            }
            Ok(_) => Pushed::Now,
            Err(refused) => Pushed::Refused(refused.to_string()),
        }
    }
}
