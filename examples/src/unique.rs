//! One job per key: [`RebuildIndex`], unique until done, [`RefreshCache`], unique until its
//! handler starts, and [`ReindexSearch`], debounced.

use redjob::middleware::{Layer, WithoutOverlapping};
use redjob::{job, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::{append, now_ms};

/// The list [`RebuildIndex`] and [`RefreshCache`] append to.
pub const UNIQUE_KEY: &str = "examples:unique";

/// Rebuilds a shop's search index: one rebuild per shop queued or running at a time, however
/// often it is asked for. Appends `{"job","shop","uuid","attempt","started_ms"}` to
/// [`UNIQUE_KEY`], runs `ms` milliseconds, and fails its first `fail_first` attempts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RebuildIndex {
    /// The shop, and the job's unique id.
    pub shop: u64,
    /// How long a run takes.
    #[serde(default)]
    pub ms: u64,
    /// Attempts that fail before one succeeds.
    #[serde(default)]
    pub fail_first: u32,
}

#[job(name = "rebuild-index", unique_for = 600, tries = 3)]
impl Job for RebuildIndex {
    fn unique_id(&self) -> String {
        self.shop.to_string()
    }

    fn middleware(&self) -> Vec<Layer> {
        // A rebuild and a refresh of one shop never run at once.
        vec![WithoutOverlapping::key(self.shop).shared().into()]
    }

    async fn handle(&self, ctx: &JobContext) -> JobResult {
        run("rebuild-index", self.shop, self.ms, ctx).await?;
        if ctx.attempt() <= self.fail_first {
            return Err(format!("rebuild of shop {} failing on purpose", self.shop).into());
        }
        Ok(())
    }
}

/// Refreshes a shop's cache: unique until it starts, so one more refresh may be queued while
/// one runs. Appends as [`RebuildIndex`] does and runs `ms` milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RefreshCache {
    /// The shop, and the job's unique id.
    pub shop: u64,
    /// How long a run takes.
    #[serde(default)]
    pub ms: u64,
}

#[job(name = "refresh-cache", unique_for = 600, unique_until = "processing")]
impl Job for RefreshCache {
    fn unique_id(&self) -> String {
        self.shop.to_string()
    }

    async fn handle(&self, ctx: &JobContext) -> JobResult {
        run("refresh-cache", self.shop, self.ms, ctx).await
    }
}

/// Reindexes a shop's search after its products change: however many changes come in a burst,
/// one reindex runs, with the latest `version`, a second after the last change, or three
/// seconds after the first. Appends `{"job","shop","version","uuid","attempt","started_ms"}`
/// to [`UNIQUE_KEY`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReindexSearch {
    /// The shop, and the job's debounce id.
    pub shop: u64,
    /// The catalogue version that asked for it.
    pub version: u64,
}

#[job(name = "reindex-search", debounce = 1, max_wait = 3)]
impl Job for ReindexSearch {
    fn debounce_id(&self) -> String {
        self.shop.to_string()
    }

    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let entry = serde_json::json!({
            "job": "reindex-search",
            "shop": self.shop,
            "version": self.version,
            "uuid": ctx.uuid(),
            "attempt": ctx.attempt(),
            "started_ms": now_ms(),
        });
        Ok(append(UNIQUE_KEY, entry).await?)
    }
}

async fn run(job: &str, shop: u64, ms: u64, ctx: &JobContext) -> JobResult {
    let entry = serde_json::json!({
        "job": job,
        "shop": shop,
        "uuid": ctx.uuid(),
        "attempt": ctx.attempt(),
        "started_ms": now_ms(),
    });
    append(UNIQUE_KEY, entry).await?;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(())
}
