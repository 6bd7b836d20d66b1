//! Unique locks: listing them, and freeing one that should not be held.

use serde::{Deserialize, Serialize};

use crate::queue::spread::KeyScan;

use super::{Admin, AdminError};

/// A unique lock held in Redis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldLock {
    /// The lock's key, as `jobsctl unique forget` takes it.
    pub key: String,
    /// The uuid of the job that holds it.
    pub holder: String,
    /// How long it lasts still, in milliseconds (`None`: no expiry, set by hand).
    pub ttl_ms: Option<u64>,
}

/// Which unique locks to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniqueFilter {
    /// Only the locks of this job type (the lock key's first part, as
    /// [`Job::unique_id`](crate::Job::unique_id) is scoped by its job's name).
    pub job: Option<String>,
}

/// One page of unique locks, sorted by key within the page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniquePage {
    /// The locks of this page.
    pub locks: Vec<HeldLock>,
    /// Where the next page starts (pass it as `after`), or `None` at the end.
    pub next: Option<String>,
}

impl Admin {
    /// One page of the unique locks `filter` matches: about `limit` of them (a `SCAN` step can give
    /// a few more), after the cursor `after` (a page's [`UniquePage::next`]). The keys are found by
    /// `SCAN` steps with a `MATCH` pattern on the Redis side (on a cluster, node after node); a
    /// page stops after its budget ([`Admin::with_page_budget`], 30 ms unless set) with what it
    /// found and a cursor. As with `SCAN`, a lock taken during the listing may or may not be
    /// listed, and no lock held throughout is missed.
    pub async fn unique_locks_page(
        &self,
        filter: &UniqueFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<UniquePage, AdminError> {
        let limit = limit.clamp(1, 1000);
        let at = match after {
            None => KeyScan::START,
            Some(text) => {
                KeyScan::parse(text).ok_or_else(|| AdminError::InvalidCursor(text.to_owned()))?
            }
        };
        let pattern = self.unique_match(filter);
        let (mut keys, next) = self
            .queue
            .scan_from(&pattern, Some("string"), at, limit, Some(self.page_budget))
            .await?;
        keys.sort();
        keys.dedup();
        Ok(UniquePage {
            locks: self.held(&keys).await?,
            next: next.map(|at| at.to_string()),
        })
    }

    /// The `SCAN` pattern of the locks `filter` matches.
    fn unique_match(&self, filter: &UniqueFilter) -> String {
        let every = self.queue.keys().unique_pattern();
        match &filter.job {
            None => every,
            Some(job) => {
                let escaped: String = job
                    .chars()
                    .flat_map(|c| match c {
                        '*' | '?' | '[' | ']' | '\\' => vec!['\\', c],
                        c => vec![c],
                    })
                    .collect();
                format!("{}{escaped}:*", every.trim_end_matches('*'))
            }
        }
    }

    /// Every unique lock, sorted by key, with its holder: the locks of unique jobs queued,
    /// delayed or running (see [`crate::payload::unique`]).
    pub async fn unique_locks(&self) -> Result<Vec<HeldLock>, AdminError> {
        let pattern = self.queue.keys().unique_pattern();
        let mut keys = self.queue.scan_keys(&pattern, Some("string")).await?;
        keys.sort();
        self.held(&keys).await
    }

    /// The locks at `keys` with their holders and expiries; keys freed meanwhile are left out.
    async fn held(&self, keys: &[String]) -> Result<Vec<HeldLock>, AdminError> {
        let mut locks = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(super::CHUNK) {
            let mut reads = Vec::with_capacity(2 * chunk.len());
            for key in chunk {
                reads.push(redis::cmd("GET").arg(key).clone());
                reads.push(redis::cmd("PTTL").arg(key).clone());
            }
            let replies: Vec<(Option<String>, i64)> = self.queue.query_each(&reads).await?;
            for (key, (holder, ttl)) in chunk.iter().zip(replies) {
                // A lock that expired or was freed since the scan is gone.
                let Some(holder) = holder else { continue };
                locks.push(HeldLock {
                    key: key.clone(),
                    holder,
                    ttl_ms: u64::try_from(ttl).ok(),
                });
            }
        }
        Ok(locks)
    }

    /// Frees the unique lock `key`, so that a job it keeps from being dispatched can be: for a
    /// lock whose job was lost (a queue cleared by hand, say). Fails with
    /// [`AdminError::UniqueLockNotFound`] when there is no such lock.
    pub async fn forget_unique(&self, key: &str) -> Result<(), AdminError> {
        let wanted = self.queue.keys().unique_pattern();
        let prefix = wanted.trim_end_matches('*');
        if !key.starts_with(prefix) {
            return Err(AdminError::UniqueLockNotFound(key.to_owned()));
        }
        let mut conn = self.queue.connection();
        let deleted: u64 = self
            .queue
            .timed(redis::AsyncCommands::del(&mut conn, key))
            .await?;
        match deleted {
            0 => Err(AdminError::UniqueLockNotFound(key.to_owned())),
            _ => Ok(()),
        }
    }
}
