//! Testing jobs without Redis: run a job synchronously through the worker's own path, or
//! run every dispatch inline.
//!
//! [`run`] takes a job through one attempt as a worker would (the attempt rules, middleware,
//! timeout, panics caught, the verdict, the `failed()` hook) and says what became of it:
//!
//! ```
//! use redjob::{job, Job, JobContext, JobResult};
//! use redjob_worker::testing::{self, Outcome};
//! use serde::{Deserialize, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! struct SyncAccount { status: u16 }
//!
//! #[job(tries = 3, backoff = [5, 30])]
//! impl Job for SyncAccount {
//!     async fn handle(&self, ctx: &JobContext) -> JobResult {
//!         match self.status {
//!             429 => ctx.release(60), // the API asks us to slow down
//!             500 => return Err("the API failed".into()),
//!             _ => {}
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let attempt = testing::run(SyncAccount { status: 429 }).await;
//! assert_eq!(attempt.outcome, Outcome::Released(Duration::from_secs(60)));
//!
//! let attempt = testing::run(SyncAccount { status: 500 }).await;
//! assert_eq!(attempt.outcome, Outcome::Retried(Duration::from_secs(5)));
//! let last = testing::run(SyncAccount { status: 500 }).attempt(3).await;
//! assert_eq!(last.outcome, Outcome::Failed("the API failed".into()));
//!
//! let runs = testing::run(SyncAccount { status: 500 }).to_end().await;
//! assert_eq!(runs.attempts.len(), 3);
//! assert!(runs.failed());
//! # });
//! ```
//!
//! [`inline()`] installs a fake queue (see [`redjob::testing`]) that runs every dispatch as
//! it is made, for tests of a whole flow without Redis.

mod inline;
mod run;

pub use inline::{inline, Inline, Ran};
pub use run::{run, Attempt, Outcome, Run, Runs, MAX_ATTEMPTS};

/// The guide `docs/testing.md`, whose examples run as this crate's doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/testing.md")]
pub struct TestingGuide;
