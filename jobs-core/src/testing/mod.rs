//! Testing code that dispatches jobs, without Redis: a fake queue that records every dispatch
//! instead of pushing it (Laravel's `Queue::fake()`, Sidekiq's `Testing.fake!`).
//!
//! [`fake()`] installs a fake on the current thread until it is dropped: every dispatch on
//! that thread that names no handle of its own (`.dispatch()`, [`Bulk`](crate::Bulk),
//! [`Chain`](crate::Chain), [`Batch`](crate::Batch)) is recorded by it. Tests run on threads
//! of their own, and `#[tokio::test]` runs a test and the tasks it spawns on the test's
//! thread, so one test's fake never sees another's dispatches. For tasks on other threads (a
//! multi-threaded runtime), wrap their futures in [`Fake::scope`], or hand the code under test
//! [`Fake::handle`] where it takes a [`RedisQueue`].
//!
//! ```
//! use redjob::{job, testing, Job, JobContext, JobResult};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendInvoice { id: u64 }
//!
//! #[job(queue = "billing")]
//! impl Job for SendInvoice {
//!     async fn handle(&self, _ctx: &JobContext) -> JobResult { Ok(()) }
//! }
//!
//! // The code under test.
//! async fn close_order(id: u64) -> Result<(), redjob::Error> {
//!     SendInvoice { id }.dispatch().delay(30).await?;
//!     Ok(())
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let fake = testing::fake();
//! close_order(7).await.unwrap();
//! fake.assert_pushed_with::<SendInvoice>(|invoice| invoice.id == 7);
//! fake.assert_pushed_on::<SendInvoice>("billing");
//! fake.assert_pushed_with_delay::<SendInvoice>(30);
//! fake.assert_pushed_times::<SendInvoice>(1);
//! # });
//! ```
//!
//! Jobs themselves are run synchronously, through the worker's own path, by
//! `redjob_worker::testing`, which also offers a fake that runs every dispatch inline.

mod assertions;
mod inline;
mod recorded;
mod recorder;
#[cfg(feature = "postgres")]
mod transactions;

pub use inline::{BoxFuture, RunInline, Work};
pub use recorded::{ChainLink, Origin, Recorded, RecordedBatch, RecordedChain};

use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::job::Job;
use crate::queue::offline::OfflineSink;
use crate::queue::{local_default, Extensions, RedisQueue, ThreadDefault};
use crate::schedule::fire::Fired;
use crate::schedule::offline::OfflineSchedules;
use crate::testing::recorder::Recorder;
use crate::workflow::offline::OfflineWorkflows;

/// A fake queue: a [`RedisQueue`] handle that records what is dispatched through it and pushes
/// nothing. Cheap to clone; clones share their records.
///
/// Dispatches reach it through [`Fake::handle`], or, when [installed](Fake::install) on a
/// thread or [scoped](Fake::scope) to a future, as the default handle there. Every other
/// operation of its handle (sizes, the failed-job store, ...) fails with an error that says it
/// is a fake.
#[derive(Clone, Debug)]
pub struct Fake {
    handle: RedisQueue,
}

impl Default for Fake {
    fn default() -> Self {
        Fake::new()
    }
}

impl Fake {
    /// A fake that records, not yet installed anywhere.
    pub fn new() -> Fake {
        Fake::with_recorder(None)
    }

    /// A fake that records every dispatch and runs it with `runner`, before the dispatch
    /// returns.
    pub fn running_inline(runner: impl RunInline) -> Fake {
        Fake::with_recorder(Some(Arc::new(runner)))
    }

    /// A fake whose handle talks to no Redis: its recorder takes what the queue layer pushes
    /// and frees, and the chains, batches and schedule ticks of the capabilities above it.
    fn with_recorder(inline: Option<Arc<dyn RunInline>>) -> Fake {
        let recorder = Arc::new(Recorder::new(inline));
        let extensions = Extensions::default();
        extensions.insert(OfflineSink(recorder.clone()));
        extensions.insert(OfflineWorkflows(recorder.clone()));
        extensions.insert(OfflineSchedules(recorder.clone()));
        #[cfg(feature = "postgres")]
        extensions.insert(crate::outbox::offline::OfflineOutboxes(recorder.clone()));
        extensions.insert(recorder);
        Fake {
            handle: RedisQueue::offline(extensions),
        }
    }

    /// Makes this fake the default handle of the current thread until the returned guard is
    /// dropped (then the one installed before it, if any, is again).
    pub fn install(&self) -> Installed {
        Installed {
            fake: self.clone(),
            _installed: self.handle.install_on_thread(),
        }
    }

    /// `future`, with this fake as the default handle while it runs, on whatever thread polls
    /// it: for a task spawned onto a multi-threaded runtime.
    pub fn scope<F: Future>(&self, future: F) -> impl Future<Output = F::Output> {
        self.handle.scope(future)
    }

    /// The fake whose handle `queue` is, if it is a fake's.
    pub fn of(queue: &RedisQueue) -> Option<Fake> {
        recorder_of(queue).map(|_| Fake {
            handle: queue.clone(),
        })
    }

    /// The fake's handle, for code that takes a [`RedisQueue`] (`.via(&handle)`).
    pub fn handle(&self) -> RedisQueue {
        self.handle.clone()
    }

    fn recorder(&self) -> Arc<Recorder> {
        recorder_of(&self.handle).expect("a fake's handle records")
    }

    /// The records, with the jobs whose transactions have committed since the last look.
    fn records(&self) -> Arc<Recorder> {
        let recorder = self.recorder();
        #[cfg(feature = "postgres")]
        recorder.record_committed(&self.handle);
        recorder
    }

    /// Every job pushed, in order: jobs dispatched alone or in bulk, each chain's first link,
    /// each batch's jobs, each schedule tick's job, and each job dispatched in a transaction
    /// that has committed.
    pub fn pushed(&self) -> Vec<Recorded> {
        self.records().state().pushed.clone()
    }

    /// The jobs of type `J` pushed, with their values, in order.
    pub fn pushed_of<J: Job>(&self) -> Vec<(J, Recorded)> {
        self.records()
            .state()
            .pushed
            .iter()
            .filter_map(|recorded| Some((recorded.decode::<J>()?, recorded.clone())))
            .collect()
    }

    /// The chains dispatched, in order.
    pub fn chains(&self) -> Vec<RecordedChain> {
        self.records().state().chains.clone()
    }

    /// The batches dispatched, in order (a batch that is a link of a chain, too).
    pub fn batches(&self) -> Vec<RecordedBatch> {
        self.records().state().batches.clone()
    }

    /// Forgets everything recorded, and every lock, debounce window and fired tick, and the
    /// jobs waiting for their transactions.
    pub fn clear(&self) {
        let recorder = self.recorder();
        *recorder.state() = recorder::State::default();
        #[cfg(feature = "postgres")]
        recorder.transactions.clear();
    }

    /// Lets the fake take dispatches made in transactions of `pool`'s database
    /// ([`in_transaction`](crate::PendingDispatch::in_transaction), feature `postgres`).
    /// Such a dispatch writes nothing into an outbox table, where a relay could move it into
    /// a real queue: the fake records its jobs once their transaction commits, as a relay would
    /// push them, and never if the transaction, or the savepoint they were made in, rolls back.
    /// Without it, a dispatch in a transaction through the fake fails with
    /// [`OutboxError::FakeWithoutDatabase`](crate::outbox::OutboxError::FakeWithoutDatabase).
    ///
    /// The fake asks PostgreSQL what became of the transactions when its records are read
    /// (every assertion reads them), on a connection of its own made with `pool`'s options.
    /// A fake that runs dispatches inline runs such jobs when it is [settled](Self::settle).
    ///
    /// ```no_run
    /// # use redjob::{job, testing, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct SendReceipt { order: i64 }
    /// # #[job] impl Job for SendReceipt { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
    /// let fake = testing::fake();
    /// fake.transactions_in(&pool);
    ///
    /// let mut tx = pool.begin().await?;
    /// SendReceipt { order: 7 }.dispatch().in_transaction(&mut tx).await?;
    /// fake.assert_transaction_holds::<SendReceipt>(&mut tx).await;
    /// fake.assert_nothing_pushed(); // not before the commit
    /// tx.commit().await?;
    /// fake.assert_pushed_with::<SendReceipt>(|receipt| receipt.order == 7);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "postgres")]
    pub fn transactions_in(&self, pool: &sqlx::PgPool) -> &Fake {
        self.recorder().transactions.watch(pool);
        self
    }

    /// Records the jobs whose transactions have committed and, in a fake that runs dispatches
    /// inline, runs them, and what they dispatch in turn, until none is left to run: the
    /// moment a worker would have taken them. Reading the records does the first part alone.
    #[cfg(feature = "postgres")]
    pub async fn settle(&self) {
        self.recorder().settle(&self.handle).await;
    }

    /// The jobs that the current transaction of `conn` holds: dispatched through this fake in
    /// it, to be recorded when it commits (River's `RequireInsertedTx`).
    ///
    /// # Panics
    ///
    /// When PostgreSQL fails the query.
    #[cfg(feature = "postgres")]
    pub async fn transaction_holds(&self, conn: &mut sqlx::PgConnection) -> Vec<Recorded> {
        let uuids = transactions::Transactions::held_by(conn)
            .await
            .unwrap_or_else(|err| panic!("cannot read the transaction's dispatches: {err}"));
        self.recorder()
            .transactions
            .waiting(&uuids)
            .iter()
            .filter_map(|envelope| Recorded::from_envelope(envelope, Origin::Dispatch))
            .collect()
    }

    /// How many jobs dispatched in transactions are not settled: waiting for their
    /// transactions to end, or, in a fake that runs dispatches inline, committed and not run
    /// yet (they run at [`settle`](Self::settle)).
    #[cfg(feature = "postgres")]
    pub fn unsettled(&self) -> usize {
        let recorder = self.records();
        let unrun = recorder.unrun();
        unrun + recorder.transactions.waiting_count()
    }

    /// Fires the defined schedule `name` ([`crate::schedule::define`]) for its tick `tick`,
    /// as a worker keeping it would: its job is recorded unless a tick as late was fired
    /// ([`Fired::Taken`]) or, without overlapping, an earlier tick's job still holds its lock
    /// ([`Fired::Skipped`]).
    pub async fn fire_schedule(&self, name: &str, tick: DateTime<Utc>) -> Result<Fired> {
        let schedule = crate::schedule::defined()
            .into_iter()
            .find(|schedule| schedule.name() == name)
            .ok_or_else(|| Error::UnknownSchedule(name.to_owned()))?;
        self.handle.fire(&schedule, tick).await
    }

    /// Fires every defined schedule's ticks after `after` and until `until`, in time order,
    /// as workers keeping them would have; returns each schedule's name, tick and what
    /// firing it did.
    pub async fn fire_schedules_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>, Fired)>> {
        let schedules = crate::schedule::defined();
        let mut ticks: Vec<(DateTime<Utc>, usize)> = Vec::new();
        for (at, schedule) in schedules.iter().enumerate() {
            let between = schedule.when().ticks_between(after, until, usize::MAX);
            ticks.extend(between.into_iter().map(|tick| (tick, at)));
        }
        ticks.sort();
        let mut fired = Vec::with_capacity(ticks.len());
        for (tick, at) in ticks {
            let schedule = &schedules[at];
            let outcome = self.handle.fire(schedule, tick).await?;
            fired.push((schedule.name().to_owned(), tick, outcome));
        }
        Ok(fired)
    }
}

/// A fake installed as the current thread's default handle ([`fake()`], [`Fake::install`]);
/// dropping it uninstalls it. Derefs to the [`Fake`], for its records and assertions.
#[derive(Debug)]
#[must_use = "the fake is uninstalled when this guard is dropped"]
pub struct Installed {
    fake: Fake,
    _installed: ThreadDefault,
}

impl std::ops::Deref for Installed {
    type Target = Fake;

    fn deref(&self) -> &Fake {
        &self.fake
    }
}

/// A new fake, installed as the current thread's default handle until the returned guard is
/// dropped: Laravel's `Queue::fake()`.
pub fn fake() -> Installed {
    Fake::new().install()
}

/// The fake that is the default handle here, if any: one scoped to the running future, else
/// the one last installed on this thread.
pub fn current() -> Option<RedisQueue> {
    let handle = local_default()?;
    recorder_of(&handle).map(|_| handle)
}

/// The recorder of a fake's handle.
fn recorder_of(queue: &RedisQueue) -> Option<Arc<Recorder>> {
    let recorder = queue.offline_part::<Arc<Recorder>>()?;
    Some(Arc::clone(&recorder))
}
