//! Batches: listing them with their progress, showing one with its failed jobs, cancelling
//! one, retrying its failed jobs, and pruning finished ones.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::cursor::Cursor;
use super::{Admin, AdminError, FailedSelection, RetryReport};
use crate::workflow::BatchStatus;

/// Batch ids read from the index per call while listing or pruning.
const PAGE: isize = 500;

/// Which batches to list. Empty fields match every batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchFilter {
    /// Only batches whose name contains this text, ignoring case.
    pub name: Option<String>,
    /// Only batches in this state.
    pub state: Option<BatchState>,
}

impl BatchFilter {
    fn matches(&self, batch: &BatchStatus) -> bool {
        let named = self
            .name
            .as_deref()
            .is_none_or(|text| batch.name.to_lowercase().contains(&text.to_lowercase()));
        named
            && self
                .state
                .is_none_or(|state| state == BatchState::of(batch))
    }
}

/// Where a batch is in its life, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchState {
    /// Jobs are pending and it was not cancelled.
    Running,
    /// Cancelled, with jobs still to settle (they are skipped).
    Cancelling,
    /// Cancelled, and every job settled.
    Cancelled,
    /// Every job settled, none failed for good.
    Finished,
    /// Every job settled, some failed for good.
    FinishedWithFailures,
}

impl BatchState {
    /// Every state, in the order a batch goes through them.
    pub const ALL: [BatchState; 5] = [
        BatchState::Running,
        BatchState::Cancelling,
        BatchState::Cancelled,
        BatchState::Finished,
        BatchState::FinishedWithFailures,
    ];

    /// The state of `batch`.
    pub fn of(batch: &BatchStatus) -> BatchState {
        match (batch.cancelled(), batch.finished()) {
            (true, true) => BatchState::Cancelled,
            (true, false) => BatchState::Cancelling,
            (false, true) if batch.failed > 0 => BatchState::FinishedWithFailures,
            (false, true) => BatchState::Finished,
            (false, false) => BatchState::Running,
        }
    }

    /// Its name: `running`, `cancelling`, `cancelled`, `finished` or
    /// `finished-with-failures`.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Running => "running",
            BatchState::Cancelling => "cancelling",
            BatchState::Cancelled => "cancelled",
            BatchState::Finished => "finished",
            BatchState::FinishedWithFailures => "finished-with-failures",
        }
    }
}

impl std::str::FromStr for BatchState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        BatchState::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = BatchState::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "unknown batch state {text:?}: expected {}",
                    names.join(", ")
                )
            })
    }
}

/// One page of batches, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BatchPage {
    /// The batches of this page.
    pub batches: Vec<BatchStatus>,
    /// Where the next page starts (pass it as `after`), or `None` at the end.
    pub next: Option<String>,
}

/// A batch with the uuids of its failed jobs, oldest failure first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchDetail {
    /// The batch as its record and sets say.
    #[serde(flatten)]
    pub status: BatchStatus,
    /// The uuids of its jobs that failed for good (and were not retried since).
    pub failed_jobs: Vec<String>,
}

/// The batches not finished yet, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PendingBatches {
    /// Batches not finished.
    pub batches: u64,
    /// Jobs pending in them.
    pub jobs: u64,
}

/// A batch not finished yet, as the gauges read it.
struct Progress {
    /// When it was created (Unix ms), its score in the indexes.
    created_at: i64,
    /// How many of its jobs are pending.
    pending: u64,
}

impl Admin {
    /// Batches, newest first, at most `limit`. A batch whose record expired or was pruned is
    /// left out (and dropped from the index).
    pub async fn batches(&self, limit: usize) -> Result<Vec<BatchStatus>, AdminError> {
        let filter = BatchFilter::default();
        let mut found = Vec::new();
        let mut after = None;
        while found.len() < limit {
            let page = self
                .batches_page(&filter, after.as_deref(), limit - found.len())
                .await?;
            found.extend(page.batches);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(found)
    }

    /// One page of the batches `filter` matches, newest first, at most `limit` (at most 500), after
    /// the cursor `after` (a page's [`BatchPage::next`]). The index is read 50 batches per step,
    /// each step's records in one round trip; a page stops after its budget
    /// ([`Admin::with_page_budget`], 30 ms unless set) with what it found and a cursor. A batch
    /// whose record expired or was pruned is dropped from the index. A filter on a state of a
    /// batch not finished (running, cancelling) reads the index of those
    /// ([`Keys::running_batches`]) instead of every batch kept, and drops from it the batches
    /// it finds finished: each is read there once more after it finished, then no longer.
    ///
    /// [`Keys::running_batches`]: crate::queue::keys::Keys::running_batches
    pub async fn batches_page(
        &self,
        filter: &BatchFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<BatchPage, AdminError> {
        const STEP: usize = 50;
        let limit = limit.clamp(1, 500);
        let keys = self.queue.keys();
        let unfinished = matches!(
            filter.state,
            Some(BatchState::Running | BatchState::Cancelling)
        );
        let index = match unfinished {
            true => {
                self.index_earlier_running_batches().await?;
                keys.running_batches()
            }
            false => keys.batches(),
        };
        let mut cursor = after.map(Cursor::parse).transpose()?;
        let started = tokio::time::Instant::now();
        let mut page = BatchPage::default();
        loop {
            let entries = self.newest_after(&index, cursor.as_ref(), STEP).await?;
            if entries.is_empty() {
                return Ok(page);
            }
            let ids: Vec<String> = entries.iter().map(|(id, _)| id.clone()).collect();
            let statuses = self.statuses_by_text(&ids).await?;
            let (mut expired, mut finished) = (Vec::new(), Vec::new());
            let mut read = 0;
            for ((id, score), status) in entries.iter().zip(statuses) {
                read += 1;
                cursor = Some(Cursor {
                    score: score.clone(),
                    member: id.clone(),
                });
                match status {
                    None => expired.push(id.clone()),
                    Some(status) if unfinished && status.finished() => finished.push(id.clone()),
                    Some(status) if filter.matches(&status) => {
                        page.batches.push(status);
                        if page.batches.len() == limit {
                            break;
                        }
                    }
                    Some(_) => {}
                }
            }
            // The expired leave both indexes; the finished, read from the running ones, that one.
            let removals: Vec<redis::Cmd> = [
                (keys.batches(), &expired),
                (keys.running_batches(), &expired),
                (keys.running_batches(), &finished),
            ]
            .into_iter()
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(key, ids)| redis::cmd("ZREM").arg(key).arg(ids).clone())
            .collect();
            if !removals.is_empty() {
                let _: () = self.queue.query_each(&removals).await?;
            }
            // A short step read the index to its end.
            let at_end = entries.len() < STEP && read == entries.len();
            if at_end {
                return Ok(page);
            }
            if page.batches.len() == limit || started.elapsed() >= self.page_budget {
                page.next = cursor.map(|c| c.to_string());
                return Ok(page);
            }
        }
    }

    /// `batches` (a page's, say) each with its failed jobs, read in one round trip.
    pub async fn with_failed_jobs(
        &self,
        batches: Vec<BatchStatus>,
    ) -> Result<Vec<BatchDetail>, AdminError> {
        let reads: Vec<redis::Cmd> = batches
            .iter()
            .map(|status| {
                let key = self.queue.keys().batch_failed(&status.id.to_string());
                redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).clone()
            })
            .collect();
        let failed: Vec<Vec<String>> = self.queue.query_each(&reads).await?;
        Ok(batches
            .into_iter()
            .zip(failed)
            .map(|(status, failed_jobs)| BatchDetail {
                status,
                failed_jobs,
            })
            .collect())
    }

    /// The batch `id` with its failed jobs; [`AdminError::BatchNotFound`] when there is no
    /// such batch.
    pub async fn batch(&self, id: &str) -> Result<BatchDetail, AdminError> {
        let status = self
            .statuses_by_text(&[id.to_owned()])
            .await?
            .pop()
            .flatten()
            .ok_or_else(|| AdminError::BatchNotFound(id.to_owned()))?;
        let mut detail = self.with_failed_jobs(vec![status]).await?;
        Ok(detail.remove(0))
    }

    /// Cancels the batch `id`: its jobs that have not started are skipped. Returns `false`
    /// when it was cancelled already; [`AdminError::BatchNotFound`] when there is no such
    /// batch.
    pub async fn cancel_batch(&self, id: &str) -> Result<bool, AdminError> {
        let uuid = parse_id(id)?;
        let mut conn = self.queue.connection();
        let record = self.queue.keys().batch(&uuid.to_string());
        let exists: bool = self
            .queue
            .timed(redis::AsyncCommands::exists(&mut conn, &record))
            .await?;
        if !exists {
            return Err(AdminError::BatchNotFound(id.to_owned()));
        }
        Ok(self.queue.cancel_batch(uuid).await?)
    }

    /// Pushes the failed jobs of the batch `id` back onto their queues, as `jobsctl retry`
    /// does; each is counted in the batch again when it settles.
    pub async fn retry_batch(&self, id: &str) -> Result<RetryReport, AdminError> {
        let detail = self.batch(id).await?;
        if detail.failed_jobs.is_empty() {
            return Ok(RetryReport::default());
        }
        self.retry(&FailedSelection::Uuids(detail.failed_jobs))
            .await
    }

    /// Deletes the batches that finished more than `hours` hours ago, and their keys; returns
    /// their ids.
    pub async fn prune_batches(&self, hours: u64) -> Result<Vec<String>, AdminError> {
        let cutoff = Utc::now() - chrono::Duration::hours(hours.min(1_000_000) as i64);
        let (index, running) = (
            self.queue.keys().batches(),
            self.queue.keys().running_batches(),
        );
        let mut pruned = Vec::new();
        let mut start = 0;
        loop {
            let ids = self.index_page(&index, start).await?;
            if ids.is_empty() {
                return Ok(pruned);
            }
            start += PAGE;
            let statuses = self.statuses_by_text(&ids).await?;
            let mut removals = Vec::new();
            let mut removed = Vec::new();
            for (id, status) in ids.into_iter().zip(statuses) {
                let old = match &status {
                    Some(status) => status.finished_at.is_some_and(|at| at < cutoff),
                    None => true,
                };
                if !old {
                    continue;
                }
                removals.push(
                    redis::cmd("DEL")
                        .arg(&self.queue.keys().batch_family(&id))
                        .clone(),
                );
                if status.is_some() {
                    pruned.push(id.clone());
                }
                removed.push(id);
            }
            if !removed.is_empty() {
                for key in [&index, &running] {
                    removals.push(redis::cmd("ZREM").arg(key).arg(&removed).clone());
                }
                let _: () = self.queue.query_each(&removals).await?;
                // The index's later members move up.
                start -= removed.len() as isize;
            }
        }
    }

    /// The batches not finished yet, and the jobs pending in them, read a page at a time from
    /// the index of running batches ([`Keys::running_batches`]): a read costs what the batches
    /// running cost, not every batch kept. A batch found finished or gone leaves that index.
    ///
    /// [`Keys::running_batches`]: crate::queue::keys::Keys::running_batches
    pub async fn pending_batches(&self) -> Result<PendingBatches, AdminError> {
        self.index_earlier_running_batches().await?;
        let running = self.queue.keys().running_batches();
        let mut pending = PendingBatches::default();
        let mut start = 0;
        loop {
            let ids = self.index_page(&running, start).await?;
            if ids.is_empty() {
                return Ok(pending);
            }
            start += PAGE;
            let mut ended = Vec::new();
            for (id, progress) in ids.iter().zip(self.progress(&ids).await?) {
                match progress {
                    Some(Progress { pending: jobs, .. }) => {
                        pending.batches += 1;
                        pending.jobs += jobs;
                    }
                    None => ended.push(id),
                }
            }
            if !ended.is_empty() {
                let mut conn = self.queue.connection();
                let _: () = self
                    .queue
                    .timed(redis::AsyncCommands::zrem(&mut conn, &running, &ended))
                    .await?;
                // The index's later members move up.
                start -= ended.len() as isize;
            }
        }
    }

    /// Adds the running batches of every batch kept to the index of running batches, once:
    /// an earlier version created batches without indexing them as running.
    async fn index_earlier_running_batches(&self) -> Result<(), AdminError> {
        let keys = self.queue.keys();
        let indexed = keys.running_batches_indexed();
        let mut conn = self.queue.connection();
        let done: bool = self
            .queue
            .timed(redis::AsyncCommands::exists(&mut conn, &indexed))
            .await?;
        if done {
            return Ok(());
        }
        let (all, running) = (keys.batches(), keys.running_batches());
        let mut start = 0;
        loop {
            let ids = self.index_page(&all, start).await?;
            if ids.is_empty() {
                break;
            }
            start += PAGE;
            let adds: Vec<(i64, &String)> = ids
                .iter()
                .zip(self.progress(&ids).await?)
                .filter_map(|(id, progress)| Some((progress?.created_at, id)))
                .collect();
            if !adds.is_empty() {
                let _: () = self
                    .queue
                    .timed(redis::AsyncCommands::zadd_multiple(
                        &mut conn, &running, &adds,
                    ))
                    .await?;
            }
        }
        let now = Utc::now().timestamp_millis();
        let _: () = self
            .queue
            .timed(redis::AsyncCommands::set(&mut conn, &indexed, now))
            .await?;
        Ok(())
    }

    /// For each of the batches `ids`, in one round trip: when it was created and how many of
    /// its jobs are pending, or `None` when it finished or is gone. Lighter than whole
    /// statuses: the gauges read it every few seconds.
    async fn progress(&self, ids: &[String]) -> Result<Vec<Option<Progress>>, AdminError> {
        let keys = self.queue.keys();
        let reads: Vec<redis::Cmd> = ids
            .iter()
            .flat_map(|id| {
                [
                    redis::cmd("HMGET")
                        .arg(keys.batch(id))
                        .arg(&["created_at", "finished_at"][..])
                        .clone(),
                    redis::cmd("SCARD").arg(keys.batch_pending(id)).clone(),
                ]
            })
            .collect();
        type State = ((Option<String>, Option<String>), u64);
        let states: Vec<State> = self.queue.query_each(&reads).await?;
        Ok(states
            .into_iter()
            .map(|((created, finished), pending)| match (created, finished) {
                (Some(created), None) => Some(Progress {
                    created_at: created.parse().unwrap_or_default(),
                    pending,
                }),
                _ => None,
            })
            .collect())
    }

    /// One page of batch ids from the index `index` (of every batch, or of running ones), from
    /// position `start`, oldest first.
    async fn index_page(&self, index: &str, start: isize) -> Result<Vec<String>, AdminError> {
        let mut conn = self.queue.connection();
        let (first, last) = (start, start + PAGE - 1);
        Ok(self
            .queue
            .timed(redis::AsyncCommands::zrange(&mut conn, index, first, last))
            .await?)
    }

    /// The batches `ids`, as the index keeps them, in order and in one round trip; `None` for
    /// one whose record is gone, or an id that is no uuid (which has no record).
    async fn statuses_by_text(
        &self,
        ids: &[String],
    ) -> Result<Vec<Option<BatchStatus>>, AdminError> {
        let uuids: Vec<Option<Uuid>> = ids.iter().map(|id| id.parse().ok()).collect();
        let known: Vec<Uuid> = uuids.iter().flatten().copied().collect();
        let mut read = self.queue.batch_statuses(&known).await?.into_iter();
        Ok(uuids
            .iter()
            .map(|uuid| uuid.and_then(|_| read.next().flatten()))
            .collect())
    }
}

fn parse_id(id: &str) -> Result<Uuid, AdminError> {
    id.parse()
        .map_err(|_| AdminError::BatchNotFound(id.to_owned()))
}
