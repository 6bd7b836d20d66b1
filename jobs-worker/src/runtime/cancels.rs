//! Cancel requests, as a worker follows them: the uuids asked to stop (`jobs:cancel`), read
//! once a second, and the requests as they are made (`jobs:cancel:signals`), read as they
//! come. A job asked to stop is settled as cancelled before it runs; a running one has its
//! context's cancellation fired at once, and again at the next read should its signal have
//! been missed (a reconnection, a request made while the job was starting).

use redjob::__worker::WorkerQueue;
use redjob::RedisQueue;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

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
    /// Whether the job `uuid` was asked to stop. With no request pending, the common case,
    /// it costs a read lock and no allocation.
    pub(crate) fn requested(&self, uuid: &uuid::Uuid) -> bool {
        let uuids = self.uuids.read().unwrap_or_else(|e| e.into_inner());
        !uuids.is_empty() && uuids.contains(&uuid.to_string())
    }

    fn add(&self, uuid: String) {
        let mut uuids = self.uuids.write().unwrap_or_else(|e| e.into_inner());
        uuids.insert(uuid);
    }

    fn replace(&self, read: HashSet<String>) {
        *self.uuids.write().unwrap_or_else(|e| e.into_inner()) = read;
    }
}

/// The thread that follows cancel requests; dropping it stops the thread.
pub(crate) struct Follower {
    stop: CancellationToken,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts following the cancel requests, on a thread and a runtime of its own, through a
/// connection of its own: a handler that blocks its thread, or every one of the worker's
/// runtime threads, must still be told of its cancel, for the watchdog to act after the
/// grace. Returns once the requests were read a first time, so the worker's first job is
/// already checked against them.
pub(crate) async fn start(
    queue: &RedisQueue,
    requests: Arc<CancelRequests>,
    running: Arc<Running>,
) -> Follower {
    let stop = CancellationToken::new();
    let (ready, first_read) = tokio::sync::oneshot::channel();
    let follow = {
        let (queue, stop) = (queue.clone(), stop.clone());
        move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    tracing::error!(error = %err, "cannot start a runtime to follow cancel requests: running jobs are not told of them");
                    return;
                }
            };
            runtime.block_on(follow(queue, requests, running, stop, ready));
        }
    };
    if let Err(err) = std::thread::Builder::new()
        .name("jobs-cancels".into())
        .spawn(follow)
    {
        tracing::error!(error = %err, "cannot start the thread that follows cancel requests: running jobs are not told of them");
    }
    let _ = first_read.await;
    Follower { stop }
}

/// The follower's loop: reads new requests as they are signalled, and all of them every
/// [`REFRESH`], until `stop`.
async fn follow(
    queue: RedisQueue,
    requests: Arc<CancelRequests>,
    running: Arc<Running>,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let queue = queue.with_own_connection().unwrap_or(queue);
    // Following starts before the first read, so that no request falls between the two.
    let mut signals = WorkerQueue::of(&queue).follow_cancel_requests().await.ok();
    refresh(&queue, &requests, &running).await;
    let _ = ready.send(());
    let mut refreshed = Instant::now();
    while !stop.is_cancelled() {
        match signals.as_mut() {
            Some(signals) => {
                for entry in signals.next(REFRESH).await {
                    if let Some(uuid) = entry.get("uuid") {
                        tell_running(&running, |running| running == uuid);
                        requests.add(uuid.clone());
                    }
                }
            }
            None => {
                tokio::time::sleep(REFRESH).await;
                signals = WorkerQueue::of(&queue).follow_cancel_requests().await.ok();
            }
        }
        if refreshed.elapsed() >= REFRESH {
            refresh(&queue, &requests, &running).await;
            refreshed = Instant::now();
        }
    }
}

/// Reads the whole set of requests, and fires the cancellation of the running jobs in it.
async fn refresh(queue: &RedisQueue, requests: &CancelRequests, running: &Running) {
    match queue.cancel_requests(KEPT).await {
        Ok(read) => {
            let read: HashSet<String> = read.into_iter().collect();
            tell_running(running, |uuid| read.contains(uuid));
            requests.replace(read);
        }
        Err(err) => tracing::debug!(error = %err, "cannot read the cancel requests"),
    }
}

/// Fires the cancellation of the running jobs that `requested` names.
fn tell_running(running: &Running, requested: impl Fn(&str) -> bool) {
    for uuid in running.cancel_requested(requested) {
        tracing::info!(%uuid, "cancel requested: telling the running job");
    }
}
