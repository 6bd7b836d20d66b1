//! Where a dispatch is recorded by the fake queue: the [`Recorder`] behind a fake's offline
//! handle takes each kind of dispatch (pushes, chains, batches, schedule ticks) through the
//! offline extension points of the layers below, and records it as a real queue would have
//! pushed it.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use uuid::Uuid;

use async_trait::async_trait;

use crate::payload::unique::{Dispatched, Duplicate};
use crate::queue::hold::Hold;
use crate::queue::offline::Offline;
use crate::queue::{Envelope, RedisQueue};
use crate::schedule::fire::Fired;
use crate::schedule::offline::OfflineSchedule;
use crate::testing::inline::{RunInline, Work};
use crate::testing::recorded::{ChainLink, Origin, Recorded, RecordedBatch, RecordedChain};
use crate::workflow::offline::OfflineWorkflow;
use crate::workflow::plan::{ChainLinks, Opening, ParkedBatch, Prepared};
use crate::workflow::Link;

/// What a fake queue recorded, and the state it keeps to refuse what a real queue would: held
/// unique locks, debounce windows, fired schedule ticks. Read it through
/// [`Fake`](super::Fake).
pub(crate) struct Recorder {
    state: Mutex<State>,
    inline: Option<Arc<dyn RunInline>>,
    /// Dispatches made in transactions, until their transactions end.
    #[cfg(feature = "postgres")]
    pub(crate) transactions: super::transactions::Transactions,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("inline", &self.inline.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
pub(crate) struct State {
    /// Every job pushed, in order.
    pub(crate) pushed: Vec<Recorded>,
    pub(crate) chains: Vec<RecordedChain>,
    pub(crate) batches: Vec<RecordedBatch>,
    /// Unique locks by key: the holder and when the lock lapses.
    locks: HashMap<String, (Uuid, Instant)>,
    /// Debounce windows by debounce key: the waiting job, when its window opened, when it is due.
    debounced: HashMap<String, (Uuid, Instant, Instant)>,
    /// Each schedule's last tick fired.
    ticks: HashMap<String, DateTime<Utc>>,
    /// What an inline fake recorded without running it yet: jobs whose transactions were
    /// found committed by a read of the records, which cannot run them.
    #[cfg(feature = "postgres")]
    unrun: Vec<Work>,
}

impl Recorder {
    pub(crate) fn new(inline: Option<Arc<dyn RunInline>>) -> Recorder {
        Recorder {
            state: Mutex::default(),
            inline,
            #[cfg(feature = "postgres")]
            transactions: Default::default(),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs what was recorded, when the fake runs dispatches inline.
    async fn run_inline(&self, queue: &RedisQueue, work: Vec<Work>) {
        if let Some(inline) = &self.inline {
            for work in work {
                inline.run(queue, work).await;
            }
        }
    }
}

/// The chain `id` as recorded from its links: a batch that is a link is followed by its
/// `then` job, the link that continues the chain after it.
fn recorded_chain(links: &ChainLinks, id: Uuid, parked: &[ParkedBatch]) -> RecordedChain {
    let mut recorded = Vec::new();
    for link in std::iter::once(&links.first).chain(&links.rest) {
        match link.starts_batch() {
            Some(batch_id) => {
                let Some(batch) = parked.iter().find(|b| b.id == batch_id) else {
                    continue;
                };
                let batch = recorded_batch(batch_id, &batch.opening, &batch.members, Some(id));
                let then = batch.then.clone();
                recorded.push(ChainLink::Batch(Box::new(batch)));
                recorded.extend(then.map(ChainLink::Job));
            }
            None => {
                recorded.extend(Recorded::from_link(link, Origin::Chain { id }).map(ChainLink::Job))
            }
        }
    }
    RecordedChain {
        id,
        links: recorded,
        catch: record_link(links.catch.as_ref()),
    }
}

fn recorded_batch(
    id: Uuid,
    opening: &Opening,
    members: &[Prepared],
    in_chain: Option<Uuid>,
) -> RecordedBatch {
    let mut jobs = Vec::with_capacity(members.len());
    let mut chains = Vec::new();
    for member in members {
        let links = &member.links;
        jobs.extend(Recorded::from_link(&links.first, Origin::Batch { id }));
        if !links.rest.is_empty() || links.catch.is_some() {
            chains.push(recorded_chain(links, links.first.uuid, &[]));
        }
    }
    let [then, catch, finally] = &opening.callbacks.links;
    RecordedBatch {
        id,
        name: opening.name.clone(),
        allow_failures: opening.allow_failures,
        jobs,
        chains,
        then: record_link(then.as_ref()),
        catch: record_link(catch.as_ref()),
        finally: record_link(finally.as_ref()),
        in_chain,
    }
}

fn record_link(link: Option<&Link>) -> Option<Recorded> {
    Recorded::from_link(link?, Origin::Dispatch)
}

impl Recorder {
    /// Records pushes: a unique job whose lock is held is refused, as Redis would refuse it;
    /// a debounced job replaces the one still waiting in its window. Returns what became of
    /// each, and the work an inline fake runs.
    fn record(&self, queue: &RedisQueue, envelopes: &[Envelope]) -> (Vec<Dispatched>, Vec<Work>) {
        let now = Instant::now();
        let mut outcomes = Vec::with_capacity(envelopes.len());
        let mut run = Vec::new();
        {
            let mut state = self.state();
            for envelope in envelopes {
                if let Some(unique) = &envelope.unique {
                    let key = queue.keys().unique(&envelope.queue, &unique.lock.key);
                    if let Some((holder, _)) = state.locks.get(&key).filter(|(_, t)| *t > now) {
                        outcomes.push(Dispatched::Duplicate(Duplicate {
                            job: envelope.job.to_string(),
                            unique_id: unique.unique_id.clone(),
                            holder: *holder,
                        }));
                        continue;
                    }
                    state.locks.insert(key, (envelope.uuid, now + unique.lasts));
                }
                if let (Some(debounce), None) = (&envelope.debounce, &self.inline) {
                    let mut first = now;
                    let window = state.debounced.get(&debounce.key).copied();
                    if let Some((waiting, opened, _)) = window.filter(|(_, _, due)| *due > now) {
                        state.pushed.retain(|job| job.uuid != waiting);
                        first = opened;
                    }
                    let due = (now + debounce.wait).min(first + debounce.max_wait);
                    state
                        .debounced
                        .insert(debounce.key.clone(), (envelope.uuid, first, due));
                }
                outcomes.push(Dispatched::Queued(envelope.uuid));
                if let Some(recorded) = Recorded::from_envelope(envelope, Origin::Dispatch) {
                    state.pushed.push(recorded.clone());
                    run.push(Work::Job(recorded));
                }
            }
        }
        (outcomes, run)
    }

    /// Records the jobs whose transactions have committed, as pushed then; an inline fake
    /// runs them at its next [`settle`](Self::settle).
    #[cfg(feature = "postgres")]
    pub(crate) fn record_committed(&self, queue: &RedisQueue) {
        let committed = self.transactions.take_committed();
        if committed.is_empty() {
            return;
        }
        let (_, work) = self.record(queue, &committed);
        if self.inline.is_some() {
            self.state().unrun.extend(work);
        }
    }

    /// How many committed jobs an inline fake has recorded and not run yet.
    #[cfg(feature = "postgres")]
    pub(crate) fn unrun(&self) -> usize {
        self.state().unrun.len()
    }

    /// Records the jobs whose transactions have committed and, in an inline fake, runs them
    /// and what they dispatch, until no committed job is left to run.
    #[cfg(feature = "postgres")]
    pub(crate) async fn settle(&self, queue: &RedisQueue) {
        loop {
            self.record_committed(queue);
            let work = std::mem::take(&mut self.state().unrun);
            if work.is_empty() {
                return;
            }
            self.run_inline(queue, work).await;
        }
    }
}

#[async_trait]
impl Offline for Recorder {
    async fn push(&self, queue: &RedisQueue, envelopes: &[Envelope]) -> Vec<Dispatched> {
        let (outcomes, run) = self.record(queue, envelopes);
        self.run_inline(queue, run).await;
        outcomes
    }

    /// Frees locks, each only if its owner holds it.
    fn free(&self, holds: &[Hold]) {
        let mut state = self.state();
        for hold in holds {
            let owned = state
                .locks
                .get(&hold.key)
                .is_some_and(|(holder, _)| holder.to_string() == hold.owner);
            if owned {
                state.locks.remove(&hold.key);
            }
        }
    }
}

#[async_trait]
impl OfflineWorkflow for Recorder {
    /// Records a chain: its first link pushed, the others kept.
    async fn chain(&self, queue: &RedisQueue, links: ChainLinks) {
        let chain = recorded_chain(&links, links.first.uuid, &links.batches);
        {
            let mut state = self.state();
            if let Some(ChainLink::Job(first)) = chain.links.first() {
                state.pushed.push(first.clone());
            }
            for link in &chain.links {
                if let ChainLink::Batch(batch) = link {
                    state.batches.push((**batch).clone());
                }
            }
            state.chains.push(chain.clone());
        }
        self.run_inline(queue, vec![Work::Chain(chain)]).await;
    }

    /// Records a batch: its jobs pushed, each chain's later links kept.
    async fn batch(&self, queue: &RedisQueue, id: Uuid, opening: &Opening, members: &[Prepared]) {
        let batch = recorded_batch(id, opening, members, None);
        {
            let mut state = self.state();
            state.pushed.extend(batch.jobs.iter().cloned());
            state.batches.push(batch.clone());
        }
        self.run_inline(queue, vec![Work::Batch(batch)]).await;
    }

    /// Records jobs added to the batch `id` from outside it; `false` for a batch this fake
    /// never recorded.
    async fn add_to_batch(&self, queue: &RedisQueue, id: Uuid, members: &[Prepared]) -> bool {
        let added: Vec<Recorded> = members
            .iter()
            .filter_map(|m| Recorded::from_link(&m.links.first, Origin::Batch { id }))
            .collect();
        {
            let mut state = self.state();
            let Some(batch) = state.batches.iter_mut().find(|b| b.id == id) else {
                return false;
            };
            batch.jobs.extend(added.iter().cloned());
            state.pushed.extend(added.iter().cloned());
        }
        let work = added.into_iter().map(Work::Job).collect();
        self.run_inline(queue, work).await;
        true
    }
}

#[async_trait]
impl OfflineSchedule for Recorder {
    /// Records a schedule's tick, firing it only when no tick as late was fired and, for a
    /// schedule without overlapping, when the job of an earlier tick holds no lock.
    async fn fire(
        &self,
        queue: &RedisQueue,
        name: &str,
        tick: DateTime<Utc>,
        envelope: &Envelope,
        overlap_lock: Option<(String, std::time::Duration)>,
    ) -> Fired {
        let now = Instant::now();
        let recorded = {
            let mut state = self.state();
            if state.ticks.get(name).is_some_and(|last| *last >= tick) {
                return Fired::Taken;
            }
            state.ticks.insert(name.to_owned(), tick);
            if let Some((key, lasts)) = overlap_lock {
                if state.locks.get(&key).is_some_and(|(_, t)| *t > now) {
                    return Fired::Skipped;
                }
                state.locks.insert(key, (envelope.uuid, now + lasts));
            }
            let origin = Origin::Schedule {
                name: name.to_owned(),
                tick,
            };
            let Some(recorded) = Recorded::from_envelope(envelope, origin) else {
                return Fired::Taken;
            };
            state.pushed.push(recorded.clone());
            recorded
        };
        self.run_inline(queue, vec![Work::Job(recorded)]).await;
        Fired::Pushed(envelope.uuid)
    }
}

#[cfg(feature = "postgres")]
#[async_trait]
impl crate::outbox::offline::OfflineOutbox for Recorder {
    /// Keeps the jobs until their transaction ends: recorded if it commits, dropped if it,
    /// or the savepoint they were written in, rolls back.
    async fn write(
        &self,
        conn: &mut sqlx::PgConnection,
        envelopes: Vec<Envelope>,
    ) -> Result<(), crate::outbox::OutboxError> {
        self.transactions.write(conn, envelopes).await
    }
}
