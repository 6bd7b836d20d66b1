//! Unique locks: listing them, and freeing one that should not be held.

use serde::{Deserialize, Serialize};

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

impl Admin {
    /// Every unique lock, sorted by key, with its holder: the locks of unique jobs queued,
    /// delayed or running (see [`crate::job::unique`]).
    pub async fn unique_locks(&self) -> Result<Vec<HeldLock>, AdminError> {
        let pattern = self.queue.keys().unique_pattern();
        let mut keys = self.queue.scan_keys(&pattern, Some("string")).await?;
        keys.sort();
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
