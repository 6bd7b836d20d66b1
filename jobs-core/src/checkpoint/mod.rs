//! Resumable jobs: a job marked `#[job(resumable)]` saves checkpoints of its own while it runs
//! (a serializable cursor, or the step it reached: [`JobContext::checkpoint`]), and each later
//! attempt starts from the last one ([`JobContext::last_checkpoint`]): after its worker stopped
//! for a deploy, after a release, after a crash. A long export interrupted at row 900,000
//! goes on from there instead of from zero.
//!
//! A checkpoint is kept in Redis (`jobs:checkpoint:<uuid>`, in its queue's slot on a cluster)
//! and written by one script call that also extends the attempt's reservation, only while the
//! reservation is held (`checkpoint.lua`): it never precedes nor outlives the attempt it
//! belongs to, and a crash loses no progress the job reported saved. The step that settles the
//! job done or failed deletes it in the same call as the acknowledgement (`complete.lua`,
//! `fail.lua`); a release or an interruption keeps it for the next attempt. An attempt reads it
//! before its handler runs, so a job type that is not resumable pays nothing.
//!
//! [`JobContext::checkpoint`]: crate::JobContext::checkpoint
//! [`JobContext::last_checkpoint`]: crate::JobContext::last_checkpoint

mod hook;
mod store;

use std::time::Duration;

/// How long a checkpoint is kept should its job never settle (its queue cleared by hand, say):
/// a week from its last save.
pub const CHECKPOINT_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

use crate::error::Result;
use crate::queue::RedisQueue;

impl RedisQueue {
    /// The last checkpoint the resumable job `uuid`, taken from `queue`, saved and has not
    /// settled since (JSON), for operators' tools: `None` when it has none.
    pub async fn checkpoint(&self, queue: &str, uuid: uuid::Uuid) -> Result<Option<String>> {
        let key = self.keys().checkpoint(queue, &uuid.to_string());
        self.query(redis::cmd("GET").arg(key)).await
    }
}
