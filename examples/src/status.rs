//! Tracked jobs: one that returns a value, one that reports progress and may be cancelled.

use redjob::{job, FailedContext, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::record_failure;

/// Adds its numbers, reporting its progress after each one, `step_ms` apart; fails when
/// `fail` says so. Tracked: its sum is its result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sum {
    /// The numbers to add.
    pub numbers: Vec<u64>,
    /// Milliseconds between two numbers.
    #[serde(default)]
    pub step_ms: u64,
    /// Why the job fails instead, if it must.
    #[serde(default)]
    pub fail: Option<String>,
}

#[job(name = "sum", track, result_ttl = 60)]
impl Job for Sum {
    type Output = u64;

    async fn handle(&self, ctx: &JobContext) -> JobResult<u64> {
        if let Some(reason) = &self.fail {
            return Err(reason.as_str().into());
        }
        let mut sum = 0;
        for (i, n) in self.numbers.iter().enumerate() {
            sum += n;
            ctx.progress(serde_json::json!({ "done": i + 1, "of": self.numbers.len() }));
            tokio::time::sleep(Duration::from_millis(self.step_ms)).await;
        }
        Ok(sum)
    }
}

/// Runs for `steps` steps of `step_ms` milliseconds, reporting its progress as a percentage.
/// `mode` says what it does when it is cancelled: `"stop"` stops at once (it selects on
/// [`JobContext::cancelled`]), `"ignore"` goes on with its awaits as if nothing happened,
/// `"block"` blocks its thread for each step, as a handler must not. Tracked; its `failed()`
/// hook records in `examples:failed-hooks` as [`crate::Flaky`]'s does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Countdown {
    /// Steps to run.
    pub steps: u32,
    /// Milliseconds per step.
    pub step_ms: u64,
    /// `stop`, `ignore` or `block`.
    pub mode: String,
}

#[job(name = "countdown", track)]
impl Job for Countdown {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        for step in 0..self.steps {
            ctx.progress(100 * step / self.steps.max(1));
            let pause = Duration::from_millis(self.step_ms);
            match self.mode.as_str() {
                "stop" => tokio::select! {
                    _ = ctx.cancelled() => return Err("stopped, as asked".into()),
                    _ = tokio::time::sleep(pause) => {}
                },
                "block" => std::thread::sleep(pause),
                _ => tokio::time::sleep(pause).await,
            }
        }
        ctx.progress(100);
        Ok(())
    }

    async fn failed(&self, ctx: &FailedContext) {
        record_failure(ctx).await;
    }
}

/// Returns its text. Tracked, its result kept one second: a result that expires.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Echo {
    /// What it returns.
    pub text: String,
}

#[job(name = "echo", track, result_ttl = 1)]
impl Job for Echo {
    type Output = String;

    async fn handle(&self, _ctx: &JobContext) -> JobResult<String> {
        Ok(self.text.clone())
    }
}

/// The list [`TotalOfResults`] appends to.
pub const TOTALS_KEY: &str = "examples:totals";

/// A batch's `then` callback: adds up the results of the batch's tracked jobs (numbers) and
/// appends `{"batch","total","results"}` to [`TOTALS_KEY`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TotalOfResults {}

#[job(name = "total-of-results")]
impl Job for TotalOfResults {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let batch = ctx.callback_of().ok_or("not a batch's callback")?;
        let redis = ctx.redis().ok_or("no Redis")?;
        let results = redis.batch_results(batch).await?;
        let total: u64 = results.values().filter_map(|v| v.as_u64()).sum();
        let entry = serde_json::json!({ "batch": batch, "total": total, "results": results.len() });
        crate::append(TOTALS_KEY, entry).await?;
        Ok(())
    }
}
