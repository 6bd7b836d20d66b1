//! Example jobs, used by the `worker`, `dispatch` and `demo` programs and by the tests.
//!
//! - [`Noop`] does nothing.
//! - [`Sleep`] sleeps for `ms` milliseconds.
//! - [`Block`] blocks its thread for `ms` milliseconds, as a handler must not.
//! - [`Flaky`] fails its first `fail_times` attempts, then succeeds.
//! - [`Panic`] panics, every time.
//! - Both record their final failure from their `failed()` hook in `examples:failed-hooks`, as
//!   [`FailSlowly`] does after a pause.
//! - [`Record`] appends `{"uuid","attempt","due_ms","started_ms"}` to the Redis list
//!   `examples:records`, which shows when each job started against when it was due.
//! - [`Shared`] appends `{"side":"rust","n","attempt","uuid"}` to `examples:shared`, under the
//!   name `Recorder@handle`, which a Laravel app's worker resolves to its own PHP class: a job
//!   both sides of a shared queue can run (`tests/laravel/bootstrap.php` has the PHP side).
//! - [`SendInvoice`] runs a Laravel app's own job class, `SendInvoice`, queued in PHP as
//!   `dispatch(new SendInvoice(...))`, and appends what it was given to `examples:invoices`.
//! - [`Guarded`] goes through the built-in middleware its data asks for (rate limit, funnel,
//!   overlap lock, exception throttle, skip) and records how many of its group ran at once.
//! - [`RebuildIndex`] and [`RefreshCache`] are unique per shop, until done and until they
//!   start, and never run at once for one shop; [`ReindexSearch`] is debounced per shop.
//! - [`Step`] is a link of a workflow that records when it ran in `examples:steps`, and can
//!   fail, release itself, or add links to its chain; [`Caught`] is a catch job.
//! - [`orders`] is an order service's jobs and the code that dispatches them, which
//!   `examples/tests/orders.rs` tests without Redis (`redjob::testing`).
//! - [`Sum`], [`Countdown`] and [`Echo`] are tracked: a result, progress, cancellation, a
//!   result that expires; [`TotalOfResults`] is a batch's `then` that adds up its jobs' results.
//! - [`define_schedules`] defines the example schedules the `worker` program keeps with
//!   `--schedule`.

mod guarded;
pub mod orders;
mod schedules;
mod status;
mod unique;
mod workflow;

pub use guarded::{running_key, Guarded, GUARDED_FINISHED_KEY, GUARDED_KEY};
pub use schedules::define_schedules;
pub use status::{Countdown, Echo, Sum, TotalOfResults, TOTALS_KEY};
pub use unique::{RebuildIndex, RefreshCache, ReindexSearch, UNIQUE_KEY};
pub use workflow::{now_us, Caught, Step, STEPS_KEY};

use redjob::{job, FailedContext, Job, JobContext, JobResult, RedisQueue};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The list [`Record`] appends to.
pub const RECORDS_KEY: &str = "examples:records";

/// Does nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Noop {}

#[job(name = "noop")]
impl Job for Noop {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

/// Sleeps for `ms` milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sleep {
    /// How long to sleep.
    pub ms: u64,
}

#[job(name = "sleep")]
impl Job for Sleep {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        Ok(())
    }
}

/// Sleeps for `ms` milliseconds unless its worker is asked to stop first: it then asks to be
/// put back, its attempt given back, and returns at once instead of holding the worker for
/// its grace period.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StopAware {
    /// How long to sleep.
    pub ms: u64,
}

#[job(name = "stop_aware")]
impl Job for StopAware {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(self.ms)) => {}
            _ = ctx.stopping() => ctx.interrupt(),
        }
        Ok(())
    }
}

/// Blocks its thread for `ms` milliseconds with `std::thread::sleep`, as a handler must not:
/// its timeout cannot interrupt it, so the worker's watchdog steps in: in the worker binary it
/// ends the process, in a worker built in code it abandons the handler.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Block {
    /// How long to block.
    pub ms: u64,
}

#[job(name = "block")]
impl Job for Block {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        std::thread::sleep(Duration::from_millis(self.ms));
        Ok(())
    }
}

/// Fails its first `fail_times` attempts, then succeeds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flaky {
    /// Attempts that fail before one succeeds.
    pub fail_times: u32,
}

#[job(name = "flaky")]
impl Job for Flaky {
    async fn failed(&self, ctx: &FailedContext) {
        record_failure(ctx).await;
    }

    async fn handle(&self, ctx: &JobContext) -> JobResult {
        if ctx.attempt() <= self.fail_times {
            return Err(format!(
                "flaky job failing on purpose (attempt {} of the first {})",
                ctx.attempt(),
                self.fail_times
            )
            .into());
        }
        Ok(())
    }
}

/// Fails, every time; its `failed()` hook takes `hook_ms` milliseconds before it records the
/// failure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailSlowly {
    /// How long the hook takes.
    pub hook_ms: u64,
}

#[job(name = "fail-slowly", tries = 1)]
impl Job for FailSlowly {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Err("failing on purpose".into())
    }

    async fn failed(&self, ctx: &FailedContext) {
        tokio::time::sleep(Duration::from_millis(self.hook_ms)).await;
        record_failure(ctx).await;
    }
}

/// Panics, every time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Panic {}

#[job(name = "panic")]
impl Job for Panic {
    async fn failed(&self, ctx: &FailedContext) {
        record_failure(ctx).await;
    }

    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        panic!("panic job panicking on purpose")
    }
}

/// Appends when it started, against when it was due, to [`RECORDS_KEY`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// When the job was due: the dispatch time plus its delay, in ms since the epoch.
    pub due_ms: u64,
}

#[job(name = "record")]
impl Job for Record {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let started_ms = now_ms();
        let entry = serde_json::json!({
            "uuid": ctx.uuid(),
            "attempt": ctx.attempt(),
            "due_ms": self.due_ms,
            "started_ms": started_ms,
        });
        Ok(append(RECORDS_KEY, entry).await?)
    }
}

/// The list [`Resumable`] appends each step it finishes to.
pub const RESUMABLE_KEY: &str = "examples:resumable";

/// A long job of `steps` steps of `ms` milliseconds each, resumable: it saves the next step as
/// its checkpoint after each one, and an attempt starts from the last checkpoint. Appends
/// `{"uuid","step","attempt"}` to [`RESUMABLE_KEY`] as each step ends; it stops between steps
/// when its worker does, to be put back with its attempt given back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Resumable {
    /// How many steps.
    pub steps: u64,
    /// Milliseconds each step takes.
    pub ms: u64,
}

#[job(name = "resumable", resumable)]
impl Job for Resumable {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let first: u64 = ctx.last_checkpoint()?.unwrap_or(0);
        for step in first..self.steps {
            if ctx.is_stopping() {
                ctx.interrupt();
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(self.ms)).await;
            let entry = serde_json::json!({
                "uuid": ctx.uuid(),
                "step": step,
                "attempt": ctx.attempt(),
            });
            append(RESUMABLE_KEY, entry).await?;
            ctx.checkpoint(&(step + 1)).await?;
        }
        Ok(())
    }
}

/// The list [`Shared`] appends to.
pub const SHARED_KEY: &str = "examples:shared";

/// Records which side ran it, for queues a Laravel app's workers share: its name is a PHP
/// `Class@method`, as Laravel's string jobs are named. Sleeps `ms` milliseconds first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shared {
    /// A number that tells the jobs apart.
    pub n: u64,
    /// Milliseconds to sleep before recording (0 when absent, as a Laravel app pushes it).
    #[serde(default)]
    pub ms: u64,
    /// `rust` fails the job on a Rust worker, `laravel` on a Laravel one.
    #[serde(default)]
    pub fail_on: Option<String>,
}

#[job(name = "Recorder@handle")]
impl Job for Shared {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        if self.fail_on.as_deref() == Some("rust") {
            return Err("failing on purpose on Rust".into());
        }
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        let entry = serde_json::json!({
            "side": "rust",
            "n": self.n,
            "attempt": ctx.attempt(),
            "uuid": ctx.uuid(),
            // Laravel's Context, when the dispatch sent one.
            "request_id": ctx.log_context().get("request_id"),
        });
        Ok(append(SHARED_KEY, entry).await?)
    }
}

/// The list [`SendInvoice`] appends to.
pub const INVOICES_KEY: &str = "examples:invoices";

/// The Rust side of a Laravel app's job class `SendInvoice`: filled from the PHP object's
/// properties, public, protected and private alike. Laravel's own queue properties
/// (`connection`, `queue`, `delay`, `chained`, ...) are ignored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendInvoice {
    /// A public property.
    pub id: u64,
    /// A protected property.
    pub note: String,
    /// A private property: a PHP array, as JSON.
    pub lines: serde_json::Value,
    /// An Eloquent model, as Laravel's `SerializesModels` queues it.
    pub customer: redjob::payload::laravel::ModelIdentifier,
}

#[job(name = "send-invoice", laravel = "SendInvoice")]
impl Job for SendInvoice {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let entry = serde_json::json!({
            "side": "rust",
            "id": self.id,
            "note": self.note,
            "lines": self.lines,
            "customer": self.customer,
            "attempt": ctx.attempt(),
        });
        Ok(append(INVOICES_KEY, entry).await?)
    }
}

/// The list the `failed()` hooks of [`Flaky`] and [`Panic`] append to.
pub const FAILED_HOOKS_KEY: &str = "examples:failed-hooks";

/// Appends `{"uuid","job","attempt","reason"}` to [`FAILED_HOOKS_KEY`].
async fn record_failure(ctx: &FailedContext) {
    let entry = serde_json::json!({
        "uuid": ctx.uuid(),
        "job": ctx.job_name(),
        "attempt": ctx.attempt(),
        "reason": ctx.reason(),
    });
    if let Err(err) = append(FAILED_HOOKS_KEY, entry).await {
        eprintln!("cannot record the failure of {}: {err}", ctx.uuid());
    }
}

/// Appends `entry` to the Redis list `key`, through the worker's handle.
async fn append(key: &str, entry: serde_json::Value) -> Result<(), redjob::Error> {
    let queue = RedisQueue::default_handle()?;
    queue
        .query(redis::cmd("RPUSH").arg(key).arg(entry.to_string()))
        .await
}

/// Milliseconds since the Unix epoch, by this host's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How the demo programs start: a handle to the Redis named by `REDIS_URL`, made the default,
/// with the demo's queue and its record list emptied.
pub async fn fresh_demo(queue_name: &str, records: &str) -> Result<RedisQueue, redjob::Error> {
    let queue = RedisQueue::from_env()?;
    RedisQueue::set_default(queue.clone());
    queue.clear(queue_name).await?;
    queue.query::<()>(redis::cmd("DEL").arg(records)).await?;
    Ok(queue)
}

/// Makes sure this crate's job registrations are linked into a binary that uses nothing else
/// from it.
pub fn link() {}
