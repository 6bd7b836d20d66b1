//! Cancel requests, as a worker follows them: the uuids asked to stop (`jobs:cancel`), read
//! once a second, and the requests as they are made (`jobs:cancel:signals`), read as they
//! come. A job asked to stop is settled as cancelled before it runs; a running one has its
//! context's cancellation fired at once, and again at the next read should its signal have
//! been missed (a reconnection, a request made while the job was starting).

use redjob::RedisQueue;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

use crate::runtime::lease::Running;

/// How often the whole set of requests is read.
const REFRESH: Duration = Duration::from_secs(1);

/// The most requests a worker keeps in memory; past it, jobs beyond the newest this many
/// are found by their running handler's next refresh only.
const KEPT: usize = 10_000;

/// The uuids asked to stop, as this worker last read or heard them.
#[derive(Default)]
pub(crate) struct CancelRequests {
    uuids: RwLock<HashSet<String>>,
}

impl CancelRequests {
    /// Whether the job `uuid` was asked to stop.
    pub(crate) fn requested(&self, uuid: &str) -> bool {
        let uuids = self.uuids.read().unwrap_or_else(|e| e.into_inner());
        !uuids.is_empty() && uuids.contains(uuid)
    }

    fn add(&self, uuid: String) {
        let mut uuids = self.uuids.write().unwrap_or_else(|e| e.into_inner());
        uuids.insert(uuid);
    }

    fn replace(&self, read: HashSet<String>) {
        *self.uuids.write().unwrap_or_else(|e| e.into_inner()) = read;
    }
}

/// Follows the cancel requests until aborted: fires the cancellation of the running jobs
/// asked to stop, and keeps `requests` for the jobs about to start.
pub(crate) async fn start(
    queue: RedisQueue,
    requests: Arc<CancelRequests>,
    running: Arc<Running>,
) -> JoinHandle<()> {
    // Following starts before the first read, so that no request falls between the two.
    let signals = queue.follow_cancel_requests().await;
    refresh(&queue, &requests, &running).await;
    tokio::spawn(async move {
        let mut signals = match signals {
            Ok(signals) => Some(signals),
            Err(err) => {
                tracing::warn!(error = %err, "cannot follow cancel requests; reading them once a second");
                None
            }
        };
        let mut refreshed = Instant::now();
        loop {
            match signals.as_mut() {
                Some(signals) => {
                    for entry in signals.next(REFRESH).await {
                        if let Some(uuid) = entry.get("uuid") {
                            running.cancel(uuid);
                            requests.add(uuid.clone());
                        }
                    }
                }
                None => {
                    tokio::time::sleep(REFRESH).await;
                    signals = queue.follow_cancel_requests().await.ok();
                }
            }
            if refreshed.elapsed() >= REFRESH {
                refresh(&queue, &requests, &running).await;
                refreshed = Instant::now();
            }
        }
    })
}

/// Reads the whole set of requests, and fires the cancellation of the running jobs in it.
async fn refresh(queue: &RedisQueue, requests: &CancelRequests, running: &Running) {
    match queue.cancel_requests(KEPT).await {
        Ok(read) => {
            let read: HashSet<String> = read.into_iter().collect();
            for uuid in running.running_uuids() {
                if read.contains(&uuid) {
                    running.cancel(&uuid);
                }
            }
            requests.replace(read);
        }
        Err(err) => tracing::debug!(error = %err, "cannot read the cancel requests"),
    }
}
