//! Failed jobs' `failed()` hooks: run by the worker that failed the job, and owed in Redis
//! until it reports them done, so that a hook whose worker died is run by another one.
//!
//! The script that records a failure also adds the job's uuid to `failed_jobs:hooks`, scored
//! by when another worker may take the hook over (now + `--retry-after`). The failing worker
//! runs the hook and removes the entry. Every worker looks for entries past their time every
//! third of `--retry-after` (one read; nothing more while there are none), claims them in one
//! script call (moving their time on by `--retry-after`), runs each from the failed-job
//! record, and removes it. A hook is thus never skipped; it runs a second
//! time only when a worker dies between running it and removing its entry.

use futures_util::FutureExt;
use redjob::__worker::{ClaimArgs, StateSetup, WorkerQueue};
use redjob::middleware::panic_message;
use redjob::{FailedContext, RedisQueue, State};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::config::WorkerConfig;

use super::decode::{decode_payload, Decoded, PayloadCopy};

/// Most owed hooks one worker takes at a time.
const CLAIM: usize = 10;

/// Runs a failed job's `failed()` hook ([`call`]), then reports the hook done.
pub(crate) async fn run(
    queue: &RedisQueue,
    config: &WorkerConfig,
    state: &State,
    decoded: &Decoded,
    ctx: FailedContext,
) {
    let uuid = ctx.uuid().to_string();
    call(config, state, decoded, ctx).await;
    if let Err(err) = WorkerQueue::of(queue).hook_done(&uuid).await {
        warn!(error = %err, uuid, "cannot report the failed() hook done; another worker may run it again");
    }
}

/// Runs a failed job's `failed()` hook with the application state `state`, bounded by the
/// worker's timeout; its panic or overrun is logged. Returns whether it ran to its end.
pub(crate) async fn call(
    config: &WorkerConfig,
    state: &State,
    decoded: &Decoded,
    ctx: FailedContext,
) -> bool {
    let registration = decoded.registration;
    let ctx = ctx.with_state(state, registration.state());
    let Ok(hook) = registration.failed(decoded.data(), ctx) else {
        return false;
    };
    let bound = config.timeout.unwrap_or(Duration::from_secs(60));
    match tokio::time::timeout(bound, AssertUnwindSafe(hook).catch_unwind()).await {
        Ok(Ok(())) => true,
        Ok(Err(panic)) => {
            warn!(panic = %panic_message(&*panic), "the failed() hook panicked");
            false
        }
        Err(_) => {
            warn!(
                timeout_s = bound.as_secs_f64(),
                "the failed() hook ran out of time"
            );
            false
        }
    }
}

/// Starts looking, every third of `--retry-after`, for hooks owed by workers that died before
/// running them: an owed hook waits that long anyway before another worker may take it.
pub(crate) fn start(queue: RedisQueue, config: Arc<WorkerConfig>, state: State) -> JoinHandle<()> {
    // What the hooks dispatch goes to the worker's Redis.
    let scope = queue.clone();
    tokio::spawn(scope.scope(async move {
        let every = (config.retry_after / 3).max(Duration::from_millis(50));
        let first = tokio::time::Instant::now() + every;
        let mut ticks = tokio::time::interval_at(first, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match WorkerQueue::of(&queue).hooks_due().await {
                Ok(false) => continue,
                Ok(true) => {}
                Err(err) => {
                    debug!(error = %err, "cannot look for owed failed() hooks");
                    continue;
                }
            }
            match WorkerQueue::of(&queue)
                .claim_hooks(ClaimArgs {
                    claim: config.retry_after,
                    limit: CLAIM,
                })
                .await
            {
                Ok(uuids) => {
                    for uuid in uuids {
                        run_owed(&queue, &config, &state, &uuid).await;
                    }
                }
                Err(err) => debug!(error = %err, "cannot look for owed failed() hooks"),
            }
        }
    }))
}

/// Runs the owed hook of the failed job `uuid` from its failed-job record; a record that is
/// gone (retried, forgotten, pruned) owes nothing.
async fn run_owed(queue: &RedisQueue, config: &WorkerConfig, state: &State, uuid: &str) {
    let record = match queue.failed_job(uuid).await {
        Ok(record) => record,
        Err(err) => return debug!(error = %err, uuid, "cannot read a failed job for its hook"),
    };
    let decoded = record.as_ref().and_then(|record| {
        decode_payload(&record.payload, PayloadCopy::Stored, queue.config()).ok()
    });
    match (record, decoded) {
        (Some(record), Some(decoded)) => {
            let payload = &decoded.payload;
            // The record keeps the payload as it was before the failing reservation.
            let ctx = FailedContext::new(
                payload.uuid,
                &payload.job,
                &record.queue,
                payload.attempts + 1,
                &record.exception,
            );
            run(queue, config, state, &decoded, ctx).await;
        }
        _ => {
            if let Err(err) = WorkerQueue::of(queue).hook_done(uuid).await {
                debug!(error = %err, uuid, "cannot drop an owed hook without a record");
            }
        }
    }
}
