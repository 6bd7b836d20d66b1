//! The failed-job store as a worker reads it: one record, the newest records, and the
//! `failed()` hooks still owed. Operators page and search it through
//! [`Admin`](crate::admin::Admin).

use redis::AsyncCommands;
use std::time::Duration;

use crate::error::Result;
use crate::payload::failed::FailedJob;
use crate::queue::due::seconds_arg;
use crate::queue::handle::RedisQueue;
use crate::queue::protocol::WorkerQueue;
use crate::queue::scripts;

/// Failed-job records read per call: no Redis call grows with the store.
pub(crate) const FAILED_CHUNK: usize = 500;

impl RedisQueue {
    /// The failed-job record of `uuid`, if the store has it.
    pub async fn failed_job(&self, uuid: &str) -> Result<Option<FailedJob>> {
        let records = self.failed_records(&[uuid.to_owned()]).await?;
        Ok(records.into_iter().next())
    }

    /// Failed-job records, newest first, at most `limit`.
    pub async fn failed_jobs(&self, limit: usize) -> Result<Vec<FailedJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let index = &self.keys().failed_jobs_index();
        let uuids: Vec<String> = self
            .call(|mut conn| async move { conn.zrevrange(index, 0, limit as isize - 1).await })
            .await?;
        self.failed_records(&uuids).await
    }

    /// The records of the failed jobs `uuids` that the store has and that decode, in order.
    async fn failed_records(&self, uuids: &[String]) -> Result<Vec<FailedJob>> {
        Ok(self
            .failed_raw(uuids)
            .await?
            .into_iter()
            .flatten()
            .filter_map(|json| serde_json::from_str(&json).ok())
            .collect())
    }

    /// The stored records of the failed jobs `uuids` as text, in order (`None` where the store
    /// has none), read with one `HMGET` per [`FAILED_CHUNK`] uuids.
    pub(crate) async fn failed_raw(&self, uuids: &[String]) -> Result<Vec<Option<String>>> {
        let mut records = Vec::with_capacity(uuids.len());
        for chunk in uuids.chunks(FAILED_CHUNK) {
            let mut hmget = redis::cmd("HMGET");
            hmget.arg(self.keys().failed_jobs()).arg(chunk);
            records.extend(self.query::<Vec<Option<String>>>(&hmget).await?);
        }
        Ok(records)
    }
}

/// Which owed hooks to take: up to `limit`, each for `claim`.
#[derive(Debug, Clone, Copy)]
pub struct ClaimArgs {
    /// How long the worker taking a hook has to run it before another one may.
    pub claim: Duration,
    /// The most hooks to take.
    pub limit: usize,
}

impl WorkerQueue<'_> {
    /// Reports the `failed()` hook of the failed job `uuid` done: no worker runs it again.
    pub async fn hook_done(&self, uuid: &str) -> Result<()> {
        let key = &self.handle.keys().failed_hooks();
        self.handle
            .call(|mut conn| async move { conn.zrem::<_, _, ()>(key, uuid).await })
            .await
    }

    /// Whether any owed `failed()` hook's time has come, by Redis's clock: the earliest entry
    /// and the server's time, read in one round trip.
    pub async fn hooks_due(&self) -> Result<bool> {
        let mut pipe = redis::pipe();
        pipe.zrange_withscores(self.handle.keys().failed_hooks(), 0, 0)
            .cmd("TIME");
        let (first, (seconds, micros)): (Vec<(String, f64)>, (u64, u64)) =
            self.handle.query_pipe(&pipe).await?;
        Ok(first
            .first()
            .is_some_and(|(_, due)| *due <= seconds as f64 + micros as f64 / 1e6))
    }

    /// Takes up to `claim.limit` `failed()` hooks that were owed and not reported done in time (their
    /// worker died), each for `claim.claim` before another worker may take it; returns the uuids of
    /// their failed jobs.
    pub async fn claim_hooks(&self, claim: ClaimArgs) -> Result<Vec<String>> {
        let ClaimArgs { claim, limit } = claim;
        let mut call = scripts::CLAIM_HOOKS.key(self.handle.keys().failed_hooks());
        call.arg(seconds_arg(claim)).arg(limit.max(1));
        self.handle.invoke(&call).await
    }
}
