//! Jobs for workflows: [`Step`], a link or batch job that records when it ran and can fail,
//! release itself, or add jobs to its chain or batch, and [`Caught`], a callback job.

use redjob::{job, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::append;

/// The list [`Step`] and [`Caught`] append to.
pub const STEPS_KEY: &str = "examples:steps";

/// One step of a workflow. Appends
/// `{"label","uuid","attempt","chain","batch","started_us","ended_us"}`
/// to [`STEPS_KEY`] once it has run `ms` milliseconds, then does what its fields ask.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Step {
    /// What the record calls it.
    pub label: String,
    /// How long it runs.
    #[serde(default)]
    pub ms: u64,
    /// Fails for good (no retry).
    #[serde(default)]
    pub fail: bool,
    /// Releases itself on its first attempt, to run again 0.2 s later.
    #[serde(default)]
    pub release_first: bool,
    /// Labels of steps it puts right after itself in its chain (the last one runs first).
    #[serde(default)]
    pub prepend: Vec<String>,
    /// Labels of steps it puts at the end of its chain.
    #[serde(default)]
    pub append: Vec<String>,
    /// Labels of steps it adds to its batch.
    #[serde(default)]
    pub add_to_batch: Vec<String>,
}

impl Step {
    /// A step that only records itself.
    pub fn new(label: impl Into<String>) -> Step {
        Step {
            label: label.into(),
            ..Step::default()
        }
    }
}

#[job(name = "step", tries = 3)]
impl Job for Step {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let started_us = now_us();
        if self.ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.ms)).await;
        }
        let entry = serde_json::json!({
            "label": self.label,
            "uuid": ctx.uuid(),
            "attempt": ctx.attempt(),
            "chain": ctx.chain_id(),
            "batch": ctx.batch().map(|batch| batch.id()),
            "started_us": started_us,
            "ended_us": now_us(),
        });
        append(STEPS_KEY, entry).await?;
        if self.fail {
            ctx.fail(format!("step {} fails on purpose", self.label));
        } else if self.release_first && ctx.attempt() == 1 {
            ctx.release(Duration::from_millis(200));
        }
        for label in &self.prepend {
            ctx.chain().prepend(Step::new(label.clone()).dispatch())?;
        }
        for label in &self.append {
            ctx.chain().append(Step::new(label.clone()).dispatch())?;
        }
        if let Some(batch) = ctx.batch() {
            for label in &self.add_to_batch {
                batch.add(Step::new(label.clone()).dispatch())?;
            }
        }
        Ok(())
    }
}

/// A catch job: appends `{"label":"caught:<label>","uuid","attempt"}` to [`STEPS_KEY`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Caught {
    /// What the record calls it, after `caught:`.
    pub label: String,
}

#[job(name = "caught")]
impl Job for Caught {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let entry = serde_json::json!({
            "label": format!("caught:{}", self.label),
            "uuid": ctx.uuid(),
            "attempt": ctx.attempt(),
        });
        Ok(append(STEPS_KEY, entry).await?)
    }
}

/// Microseconds since the Unix epoch, by this host's clock.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
