//! [`Guarded`]: a job that goes through whichever built-in middleware its data asks for, and
//! records what it saw, for the tests and benchmarks of the middleware.

use redjob::middleware::{
    Funnel, Layer, Limit, RateLimited, Skip, ThrottleExceptions, WithoutOverlapping,
};
use redjob::{job, Job, JobContext, JobResult, RedisQueue};
use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::{append, now_ms};

/// The list [`Guarded`] appends to.
pub const GUARDED_KEY: &str = "examples:guarded";

/// The list [`Guarded`] appends to when its handler ends.
pub const GUARDED_FINISHED_KEY: &str = "examples:guarded:finished";

/// The counter of [`Guarded`] handlers running at once, per group.
pub fn running_key(group: &str) -> String {
    format!("examples:running:{group}")
}

/// Runs through the middleware its fields ask for, then appends
/// `{"n","uuid","attempt","started_ms","running"}` to [`GUARDED_KEY`], `running` being how many
/// handlers of its `group` were running at that moment (itself included), counted in Redis.
/// It then runs `ms` milliseconds, appends `{"n","uuid","attempt","finished_ms"}` to
/// [`GUARDED_FINISHED_KEY`], and fails when `fail` is set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Guarded {
    /// Tells the jobs apart.
    pub n: u64,
    /// Group whose running handlers are counted.
    #[serde(default)]
    pub group: String,
    /// How long the handler runs, in milliseconds.
    #[serde(default)]
    pub ms: u64,
    /// A rate limit: at most this many per `window_ms` (named `guarded`, by `group`).
    #[serde(default)]
    pub rate: Option<u32>,
    /// The rate limit's window (default 1,000 ms).
    #[serde(default)]
    pub window_ms: Option<u64>,
    /// A concurrency limit: at most this many at once in the funnel named `group`.
    #[serde(default)]
    pub funnel: Option<u32>,
    /// A lock against overlapping runs with this key.
    #[serde(default)]
    pub overlap: Option<String>,
    /// An exception throttle: at most this many errors per `window_ms`, by `group`.
    #[serde(default)]
    pub throttle: Option<u32>,
    /// Skip the job.
    #[serde(default)]
    pub skip: bool,
    /// Fail the attempt after running.
    #[serde(default)]
    pub fail: bool,
}

#[job(name = "guarded")]
impl Job for Guarded {
    fn middleware(&self) -> Vec<Layer> {
        let window = Duration::from_millis(self.window_ms.unwrap_or(1000));
        let mut layers: Vec<Layer> = vec![Skip::when(self.skip).into()];
        if let Some(rate) = self.rate {
            let limit = Limit::new(rate, window).named("guarded").by(&self.group);
            layers.push(RateLimited::new(limit).into());
        }
        if let Some(slots) = self.funnel {
            let funnel = Funnel::named(&self.group).limit(slots);
            layers.push(funnel.release_after(Duration::from_millis(100)).into());
        }
        if let Some(key) = &self.overlap {
            let overlap = WithoutOverlapping::key(key);
            layers.push(overlap.release_after(Duration::from_millis(100)).into());
        }
        if let Some(errors) = self.throttle {
            layers.push(
                ThrottleExceptions::new(errors, window)
                    .by(&self.group)
                    .into(),
            );
        }
        layers
    }

    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let queue = RedisQueue::default_handle()?;
        let counter = running_key(&self.group);
        let running: i64 = queue.query(redis::cmd("INCR").arg(&counter)).await?;
        let entry = serde_json::json!({
            "n": self.n,
            "uuid": ctx.uuid(),
            "attempt": ctx.attempt(),
            "started_ms": now_ms(),
            "running": running,
        });
        append(GUARDED_KEY, entry).await?;
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        queue.query::<i64>(redis::cmd("DECR").arg(&counter)).await?;
        let finished = serde_json::json!({
            "n": self.n,
            "uuid": ctx.uuid(),
            "attempt": ctx.attempt(),
            "finished_ms": now_ms(),
        });
        append(GUARDED_FINISHED_KEY, finished).await?;
        if self.fail {
            return Err(format!("guarded job {} failing on purpose", self.n).into());
        }
        Ok(())
    }
}
