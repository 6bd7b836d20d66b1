//! The acker: deletes the reservations of finished jobs, many at a time.
//!
//! A job is acknowledged only after its handler returned: the processor hands the finished
//! job's reserved copy to the acker and frees its slot at once, and the acker removes the
//! reserved copies it has collected with one `ZREM` per queue. If the worker dies before that,
//! the job comes back after retry_after, as it would had the worker died a moment earlier.

use jobs_core::keys::QueueKeys;
use jobs_core::RedisQueue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::processor::Reserved;
use crate::retry::with_retries;

/// Most reservations removed by one `ZREM`.
const MAX_BATCH: usize = 1000;

/// Handle to the acker task.
pub struct Acker {
    sender: AckSender,
    task: JoinHandle<()>,
}

impl Acker {
    /// Starts an acker writing through `queue`. It retries through Redis outages for up to
    /// `retry_after`; after that the reservations expire and the jobs run again.
    pub fn start(queue: RedisQueue, retry_after: Duration) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let sender = AckSender {
            sender,
            unacknowledged: Arc::default(),
        };
        let task = tokio::spawn(run(
            queue,
            receiver,
            sender.unacknowledged.clone(),
            retry_after,
        ));
        Acker { sender, task }
    }

    /// A sender for finished jobs.
    pub fn sender(&self) -> AckSender {
        self.sender.clone()
    }

    /// Acknowledges everything sent so far, then stops.
    pub async fn close(self) {
        drop(self.sender);
        if let Err(err) = self.task.await {
            warn!(error = %err, "the acker ended abnormally; unacknowledged jobs come back after retry_after");
        }
    }
}

/// Sends finished jobs to the acker.
#[derive(Clone)]
pub struct AckSender {
    sender: mpsc::UnboundedSender<Reserved>,
    unacknowledged: Arc<AtomicUsize>,
}

impl AckSender {
    /// Queues a finished job's reservation for deletion.
    pub fn ack(&self, job: Reserved) {
        self.unacknowledged.fetch_add(1, Ordering::SeqCst);
        if self.sender.send(job).is_err() {
            self.unacknowledged.fetch_sub(1, Ordering::SeqCst);
            warn!("the acker has stopped; the job comes back after retry_after");
        }
    }

    /// How many finished jobs sent to the acker it has not yet finished deleting (or given
    /// up on).
    pub fn unacknowledged(&self) -> usize {
        self.unacknowledged.load(Ordering::SeqCst)
    }
}

async fn run(
    queue: RedisQueue,
    mut receiver: mpsc::UnboundedReceiver<Reserved>,
    unacknowledged: Arc<AtomicUsize>,
    retry_after: Duration,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
        for (keys, members) in Reserved::by_queue(&batch) {
            delete(&queue, keys, &members, retry_after).await;
        }
        unacknowledged.fetch_sub(batch.len(), Ordering::SeqCst);
        batch.clear();
    }
}

/// Deletes reservations of one queue, retrying through short outages.
async fn delete(queue: &RedisQueue, keys: &QueueKeys, members: &[&str], retry_after: Duration) {
    let removed = with_retries(retry_after, "acknowledge finished jobs", || {
        queue.delete_many(keys, members)
    })
    .await;
    let missing = removed.map_or(0, |removed| members.len() as u64 - removed);
    if missing > 0 {
        warn!(
            queue = %keys.name,
            missing,
            "finished jobs whose reservations were no longer held; nothing changed for them"
        );
    }
}
