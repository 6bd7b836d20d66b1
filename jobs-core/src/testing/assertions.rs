//! The fake's assertions. Each panics, as `assert!` does, with a message that lists what was
//! dispatched.

use std::fmt::Write;

use super::recorded::{Recorded, RecordedBatch, RecordedChain};
use super::Fake;
use crate::job::Job;
use crate::payload::delay::Delay;

impl Fake {
    /// Asserts that the current transaction of `conn` holds a job of type `J`, dispatched
    /// through this fake in it (River's `RequireInsertedTx`); see
    /// [`transactions_in`](Fake::transactions_in).
    #[cfg(feature = "postgres")]
    #[track_caller]
    pub fn assert_transaction_holds<'a, J: Job>(
        &'a self,
        conn: &'a mut sqlx::PgConnection,
    ) -> impl std::future::Future<Output = ()> + 'a {
        let caller = std::panic::Location::caller();
        async move {
            let held = self.transaction_holds(conn).await;
            if !held.iter().any(|job| job.is::<J>()) {
                let listed = numbered(format!("; it holds {} job(s)", held.len()), &held);
                panic!(
                    "expected the transaction to hold a {} (at {caller}){listed}",
                    J::NAME
                );
            }
        }
    }

    /// Asserts that a job of type `J` was pushed.
    #[track_caller]
    pub fn assert_pushed<J: Job>(&self) {
        self.assert_pushed_where::<J>("", |_, _| true);
    }

    /// Asserts that a job of type `J` for which `check` holds was pushed.
    #[track_caller]
    pub fn assert_pushed_with<J: Job>(&self, check: impl Fn(&J) -> bool) {
        self.assert_pushed_where::<J>(" matching the check", |job, _| check(job));
    }

    /// Asserts that a job of type `J` was pushed onto `queue`.
    #[track_caller]
    pub fn assert_pushed_on<J: Job>(&self, queue: &str) {
        let wanted = format!(" on queue {queue:?}");
        self.assert_pushed_where::<J>(&wanted, |_, recorded| recorded.queue == queue);
    }

    /// Asserts that a job of type `J` was pushed with this delay: seconds, a `Duration`, or a
    /// point in time, as given to its dispatch.
    #[track_caller]
    pub fn assert_pushed_with_delay<J: Job>(&self, delay: impl Into<Delay>) {
        let delay = delay.into();
        let wanted = format!(" with delay {delay:?}");
        self.assert_pushed_where::<J>(&wanted, |_, recorded| recorded.delay == Some(delay));
    }

    /// Asserts that a job of type `J` for which `check` holds, given the job and its record
    /// (queue, delay, payload, origin), was pushed.
    #[track_caller]
    pub fn assert_pushed_matching<J: Job>(&self, check: impl Fn(&J, &Recorded) -> bool) {
        self.assert_pushed_where::<J>(" matching the check", check);
    }

    /// Asserts that jobs of type `J` were pushed exactly `times` times.
    #[track_caller]
    pub fn assert_pushed_times<J: Job>(&self, times: usize) {
        let pushed = self.pushed();
        let found = pushed.iter().filter(|job| job.is::<J>()).count();
        if found != times {
            panic!(
                "expected {} pushed {times} time(s), found {found}{}",
                J::NAME,
                self.listing(&pushed)
            );
        }
    }

    /// Asserts that no job of type `J` was pushed.
    #[track_caller]
    pub fn assert_not_pushed<J: Job>(&self) {
        self.assert_pushed_times::<J>(0);
    }

    /// Asserts that no job was pushed at all.
    #[track_caller]
    pub fn assert_nothing_pushed(&self) {
        let pushed = self.pushed();
        if !pushed.is_empty() {
            panic!("expected nothing pushed{}", self.listing(&pushed));
        }
    }

    /// Asserts that a chain was dispatched whose links are jobs of these registered names
    /// ([`Job::NAME`]), in this order; a batch link is named `"batch"`.
    ///
    /// ```
    /// # use redjob::{job, testing, Chain, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ImportFile { file: u64 }
    /// # #[job] impl Job for ImportFile { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # #[derive(Serialize, Deserialize)] struct IndexFile { file: u64 }
    /// # #[job] impl Job for IndexFile { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let fake = testing::fake();
    /// Chain::new(ImportFile { file: 1 }.dispatch())
    ///     .then(IndexFile { file: 1 }.dispatch())
    ///     .dispatch()
    ///     .await
    ///     .unwrap();
    /// fake.assert_chained(&[ImportFile::NAME, IndexFile::NAME]);
    /// fake.assert_pushed::<ImportFile>(); // the first link is pushed at once
    /// fake.assert_not_pushed::<IndexFile>(); // the second when the first is done
    /// # });
    /// ```
    #[track_caller]
    pub fn assert_chained(&self, names: &[&str]) {
        let chains = self.chains();
        if !chains.iter().any(|chain| chain.names() == names) {
            panic!("expected a chain of {names:?}{}", chain_listing(&chains));
        }
    }

    /// Asserts that a batch for which `check` holds was dispatched.
    ///
    /// ```
    /// # use redjob::{job, testing, Batch, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ImportRows { from: u64 }
    /// # #[job] impl Job for ImportRows { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let fake = testing::fake();
    /// Batch::new()
    ///     .name("import")
    ///     .jobs((0..3).map(|page| ImportRows { from: page * 100 }.dispatch()))
    ///     .dispatch()
    ///     .await
    ///     .unwrap();
    /// fake.assert_batched(|batch| batch.name == "import" && batch.count::<ImportRows>() == 3);
    /// # });
    /// ```
    #[track_caller]
    pub fn assert_batched(&self, check: impl Fn(&RecordedBatch) -> bool) {
        let batches = self.batches();
        if !batches.iter().any(check) {
            let mut listed = String::new();
            for batch in &batches {
                let _ = write!(
                    listed,
                    "\n  batch {:?} ({}): {:?}",
                    batch.name,
                    batch.id,
                    batch.names()
                );
            }
            if batches.is_empty() {
                listed.push_str("; no batch was dispatched");
            }
            panic!("expected a batch matching the check{listed}");
        }
    }

    #[track_caller]
    fn assert_pushed_where<J: Job>(&self, wanted: &str, check: impl Fn(&J, &Recorded) -> bool) {
        let pushed = self.pushed();
        let found = pushed.iter().any(|recorded| {
            recorded
                .decode::<J>()
                .is_some_and(|job| check(&job, recorded))
        });
        if !found {
            panic!(
                "expected {} pushed{wanted}{}",
                J::NAME,
                self.listing(&pushed)
            );
        }
    }
}

/// What was pushed, one job a line, for a failure message.
impl Fake {
    /// What was pushed, one a line, and how many jobs still wait for their transactions.
    fn listing(&self, pushed: &[Recorded]) -> String {
        let heading = match pushed.len() {
            0 => "; nothing was pushed".to_owned(),
            n => format!("; {n} job(s) pushed:"),
        };
        #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
        let mut listed = numbered(heading, pushed);
        #[cfg(feature = "postgres")]
        match self.recorder().transactions.waiting_count() {
            0 => {}
            n => {
                let _ = write!(
                    listed,
                    "\n  ({n} job(s) dispatched in transactions not committed yet)"
                );
            }
        }
        listed
    }
}

/// `heading`, then `jobs`, one a numbered line.
fn numbered(mut heading: String, jobs: &[Recorded]) -> String {
    for (at, job) in jobs.iter().enumerate() {
        let _ = write!(heading, "\n  {}. {job}", at + 1);
    }
    heading
}

/// What chains were dispatched, one a line.
fn chain_listing(chains: &[RecordedChain]) -> String {
    if chains.is_empty() {
        return "; no chain was dispatched".to_owned();
    }
    let mut listed = format!("; {} chain(s) dispatched:", chains.len());
    for chain in chains {
        let _ = write!(listed, "\n  {:?}", chain.names());
    }
    listed
}
