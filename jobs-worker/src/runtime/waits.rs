//! The worker's `--wait` thresholds, written to Redis (`jobs:waits`) when it starts, so that
//! `jobsctl`, the dashboard and every worker's metrics see them.
//!
//! They are written once: a threshold changed later with `jobsctl waits set` or removed with
//! `jobsctl waits clear` stays so until a worker with `--wait` for that queue starts again.
//! A worker writes them once Redis has answered its checks at start; should Redis be gone by
//! then, or not be there for a `--schedule-only` process, which does not wait for it, the
//! write is retried in the background until it succeeds or the process stops.

use redjob::admin::WaitThreshold;
use redjob::RedisQueue;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::runtime::outage::Pause;

/// Writes `thresholds` (a queue given twice keeps its last) once, retrying in a task of its
/// own, returned, while Redis cannot be reached. Nothing to write: nothing done.
pub(crate) async fn write(
    queue: &RedisQueue,
    thresholds: &[WaitThreshold],
    stop: &CancellationToken,
) -> Option<JoinHandle<()>> {
    if thresholds.is_empty() {
        return None;
    }
    let Err(err) = try_write(queue, thresholds).await else {
        return None;
    };
    warn!(error = %err, "cannot write the --wait thresholds yet; retrying");
    let (queue, thresholds, stop) = (queue.clone(), thresholds.to_vec(), stop.clone());
    Some(tokio::spawn(async move {
        let mut pause = Pause::new(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(pause.take()) => {}
                _ = stop.cancelled() => return,
            }
            if try_write(&queue, &thresholds).await.is_ok() {
                return;
            }
        }
    }))
}

async fn try_write(queue: &RedisQueue, thresholds: &[WaitThreshold]) -> redjob::Result<()> {
    let fields: Vec<(&str, u64)> = thresholds.iter().map(|t| (t.queue(), t.secs())).collect();
    let _: () = queue
        .query(redis::cmd("HSET").arg(queue.keys().waits()).arg(&fields))
        .await?;
    info!(
        waits = %thresholds.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        "wait thresholds set"
    );
    Ok(())
}
