//! Running every dispatch inline, as it is made (Laravel's `sync` driver, Sidekiq's
//! `Testing.inline!`), through the synchronous runner.

use redjob::testing::{
    BoxFuture, ChainLink, Fake, Installed, Recorded, RecordedBatch, RunInline, Work,
};
use redjob::{Job, RedisQueue, State};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tracing::warn;

use super::run::{Outcome, Run, Runs};
use crate::config::WorkerConfig;

/// A fake queue installed on the current thread that runs every dispatch before the dispatch
/// returns, and records it too. Derefs to the [`Fake`], for its records and assertions.
///
/// - A job runs attempt after attempt until it is done or fails ([`Run::to_end`]); delays and
///   backoffs are not waited. A failed job's `failed()` hook runs; the dispatch still returns
///   its uuid ([`Inline::assert_nothing_failed`] checks).
/// - A chain runs its links in order, with what each prepends or appends; a link that fails
///   runs the catch job and stops it.
/// - A batch runs its jobs and chains in order, and the jobs they add; its first failure runs
///   `catch` and, unless it allows failures, skips the jobs left; `then` runs when none
///   failed, `finally` at the end.
/// - A schedule fired through the fake runs its job.
#[derive(Debug)]
#[must_use = "the fake is uninstalled when this guard is dropped"]
pub struct Inline {
    installed: Installed,
    ran: Arc<Mutex<Vec<Ran>>>,
    state: Arc<Mutex<State>>,
}

/// A job an [`Inline`] fake ran, and its attempts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Ran {
    /// The job as dispatched.
    pub job: Recorded,
    /// Its attempts.
    pub runs: Runs,
}

/// A fake that runs every dispatch inline, installed on the current thread until the guard
/// is dropped, running jobs as a worker with [`WorkerConfig::default`] would.
pub fn inline() -> Inline {
    Inline::with_config(WorkerConfig::default())
}

impl Inline {
    /// A fake that runs every dispatch inline as a worker with `config` would (its tries,
    /// backoff and timeout for jobs that set none), installed on the current thread.
    pub fn with_config(config: WorkerConfig) -> Inline {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(Mutex::new(State::new()));
        let runner = Runner {
            config,
            ran: ran.clone(),
            state: state.clone(),
        };
        Inline {
            installed: Fake::running_inline(runner).install(),
            ran,
            state,
        }
    }

    /// Gives the jobs it runs `value` as application state, as `Worker::state` does.
    ///
    /// # Panics
    ///
    /// When a value of this type was given already.
    #[track_caller]
    pub fn state<T: Send + Sync + 'static>(self, value: T) -> Inline {
        let inserted = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(value);
        if let Err(duplicate) = inserted {
            panic!("{duplicate}");
        }
        self
    }

    /// Every job run, in the order they finished.
    pub fn ran(&self) -> Vec<Ran> {
        self.ran.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asserts that a job of type `J` ran and was done.
    #[track_caller]
    pub fn assert_ran<J: Job>(&self) {
        let ran = self.ran();
        if !ran.iter().any(|r| r.job.is::<J>() && r.runs.succeeded()) {
            panic!(
                "expected {} run to its end{}{}",
                J::NAME,
                listing(&ran),
                self.unsettled_note()
            );
        }
    }

    /// Asserts that no job failed for good.
    #[track_caller]
    pub fn assert_nothing_failed(&self) {
        let ran = self.ran();
        if ran.iter().any(|r| !r.runs.succeeded()) {
            panic!("expected every job to succeed{}", listing(&ran));
        }
    }
}

impl Inline {
    /// A line on the jobs dispatched in transactions that have not run yet, if any.
    fn unsettled_note(&self) -> String {
        #[cfg(feature = "postgres")]
        if let n @ 1.. = self.installed.unsettled() {
            return format!(
                "\n  ({n} job(s) dispatched in transactions have not run: they run once their \
                 transactions commit and the fake is settled, `flow.settle().await`)"
            );
        }
        String::new()
    }
}

impl std::ops::Deref for Inline {
    type Target = Fake;

    fn deref(&self) -> &Fake {
        &self.installed
    }
}

fn listing(ran: &[Ran]) -> String {
    if ran.is_empty() {
        return "; no job ran".to_owned();
    }
    let mut listed = format!("; {} job(s) ran:", ran.len());
    for r in ran {
        listed.push_str(&format!(
            "\n  {} ({} attempt(s)): {:?}",
            r.job.job,
            r.runs.attempts.len(),
            r.runs.outcome()
        ));
    }
    listed
}

/// Runs what the fake records.
struct Runner {
    config: WorkerConfig,
    ran: Arc<Mutex<Vec<Ran>>>,
    state: Arc<Mutex<State>>,
}

/// What running one job gave its workflow.
struct Settled {
    succeeded: bool,
    /// The links its handler added to its chain, to run next and last.
    prepended: Vec<Recorded>,
    appended: Vec<Recorded>,
    /// The jobs its handler added to its batch.
    batch_added: Vec<Recorded>,
}

impl RunInline for Runner {
    fn run<'a>(&'a self, queue: &'a RedisQueue, work: Work) -> BoxFuture<'a> {
        Box::pin(async move {
            match work {
                Work::Job(job) => {
                    let settled = self.job(queue, job).await;
                    // A job that is no link starts a chain with the links it adds.
                    let links = settled.prepended.into_iter().rev().chain(settled.appended);
                    let links = links.map(ChainLink::Job).collect();
                    self.chain(queue, links, None, &mut Vec::new()).await;
                }
                Work::Chain(chain) => {
                    let links = chain.links.into_iter().collect();
                    self.chain(queue, links, chain.catch, &mut Vec::new()).await;
                }
                Work::Batch(batch) => {
                    self.batch(queue, batch).await;
                }
                _ => warn!("an inline fake cannot run this dispatch; it is only recorded"),
            }
        })
    }
}

impl Runner {
    /// Runs one job to its end.
    async fn job(&self, queue: &RedisQueue, job: Recorded) -> Settled {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let runs = Run::recorded(&job)
            .config(self.config.clone())
            .with_state(state)
            .via(queue)
            .to_end()
            .await;
        let last = runs.last();
        let settled = Settled {
            succeeded: runs.succeeded(),
            prepended: last.chain_prepended.clone(),
            appended: last.chain_appended.clone(),
            batch_added: last.batch_added.clone(),
        };
        if let Outcome::Failed(reason) = runs.outcome() {
            warn!(job = %job.job, uuid = %job.uuid, reason = %reason, "an inline job failed");
        }
        self.ran
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Ran { job, runs });
        settled
    }

    /// Runs a chain's links in order; a failed link runs `catch` and stops it. Jobs its links
    /// add to their batch go to `batch_added`. Returns whether every link succeeded.
    fn chain<'a>(
        &'a self,
        queue: &'a RedisQueue,
        mut links: VecDeque<ChainLink>,
        catch: Option<Recorded>,
        batch_added: &'a mut Vec<Recorded>,
    ) -> Boxed<'a, bool> {
        Box::pin(async move {
            while let Some(link) = links.pop_front() {
                match link {
                    ChainLink::Job(job) => {
                        let settled = self.job(queue, job).await;
                        if !settled.succeeded {
                            if let Some(catch) = catch {
                                self.job(queue, catch).await;
                            }
                            return false;
                        }
                        // The last one prepended runs first, as Laravel's prependToChain.
                        for link in settled.prepended {
                            links.push_front(ChainLink::Job(link));
                        }
                        links.extend(settled.appended.into_iter().map(ChainLink::Job));
                        batch_added.extend(settled.batch_added);
                    }
                    // A failed batch has run its catch job, which is the chain's.
                    ChainLink::Batch(batch) => {
                        if !self.batch(queue, *batch).await {
                            return false;
                        }
                    }
                }
            }
            true
        })
    }

    /// Runs a batch's jobs and chains in order, then its callbacks. Returns whether none
    /// failed.
    fn batch<'a>(&'a self, queue: &'a RedisQueue, batch: RecordedBatch) -> Boxed<'a, bool> {
        Box::pin(async move {
            let mut jobs: VecDeque<Recorded> = batch.jobs.iter().cloned().collect();
            let mut failed = false;
            while let Some(job) = jobs.pop_front() {
                if failed && !batch.allow_failures {
                    // Its batch was cancelled: a worker would skip it.
                    continue;
                }
                let mut added = Vec::new();
                let succeeded = match batch.chain_of(&job) {
                    Some(chain) => {
                        let links = chain.links.iter().cloned().collect();
                        let catch = chain.catch.clone();
                        self.chain(queue, links, catch, &mut added).await
                    }
                    None => {
                        let settled = self.job(queue, job).await;
                        added = settled.batch_added;
                        settled.succeeded
                    }
                };
                jobs.extend(added);
                if !succeeded && !failed {
                    failed = true;
                    if let Some(catch) = &batch.catch {
                        self.job(queue, catch.clone()).await;
                    }
                }
            }
            // A batch that is a link of a chain: its `then` is the chain's next link.
            if let (false, None, Some(then)) = (failed, batch.in_chain, &batch.then) {
                self.job(queue, then.clone()).await;
            }
            if let Some(finally) = &batch.finally {
                self.job(queue, finally.clone()).await;
            }
            !failed
        })
    }
}

/// A boxed future, for the runner's recursion (a chain's batch, a batch's chains).
type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
