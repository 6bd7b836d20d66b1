//! The acker: deletes the reservations of finished jobs, many at a time.
//!
//! A job is acknowledged only after its handler returned: the processor hands the finished
//! job's reserved copy to the acker and frees its slot at once, and the acker removes the
//! reserved copies it has collected with one `ZREM` per queue, and those of the jobs of a
//! batch with one script call per queue and batch that counts them there in the same step. If the worker dies before that,
//! the job comes back after retry_after, as it would had the worker died a moment earlier.
//! Acknowledgements that cannot be delivered (Redis is unreachable) are kept and sent again,
//! with whatever finished meanwhile, until Redis answers.

use redjob::__worker::{BatchCompleteArgs, DeleteArgs, WorkerQueue};
use redjob::queue::keys::QueueKeys;
use redjob::{Durability, RedisQueue};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::warn;
use uuid::Uuid;

use crate::runtime::lifecycle::{Service, Stopping};
use crate::runtime::outage::Pause;
use crate::runtime::reserved::Reserved;

/// Most reservations removed by one `ZREM`.
const MAX_BATCH: usize = 1000;

/// Handle to the acker task.
pub(crate) struct Acker {
    sender: AckSender,
    task: JoinHandle<()>,
}

impl Acker {
    /// Starts an acker writing through `queue`. While the worker runs, it retries through
    /// Redis outages until the acknowledgements are delivered; once closed, for up to
    /// `retry_after`, after which the reservations have expired and the jobs run again.
    pub(crate) fn start(queue: RedisQueue, retry_after: Duration, durability: Durability) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let sender = AckSender {
            sender,
            unacknowledged: Arc::default(),
        };
        let task = tokio::spawn(run(
            queue,
            durability,
            receiver,
            sender.unacknowledged.clone(),
            retry_after,
        ));
        Acker { sender, task }
    }

    /// A sender for finished jobs.
    pub(crate) fn sender(&self) -> AckSender {
        self.sender.clone()
    }

    /// Acknowledges everything sent so far, then stops. If Redis stays unreachable, it gives up
    /// after `retry_after`: those jobs come back and run again.
    pub(crate) async fn close(self) {
        drop(self.sender);
        if let Err(err) = self.task.await {
            warn!(error = %err, "the acker ended abnormally; unacknowledged jobs come back after retry_after");
        }
    }
}

impl Service for Acker {
    /// [`Acker::close`]: once every sender is gone, which the services started after it hold.
    fn stop(self: Box<Self>) -> Stopping {
        Box::pin(self.close())
    }
}

/// A finished job for the acker: its reservation, and for a job of a batch, the batch's id and
/// the job's uuid, by which the batch counts it.
pub(crate) struct Finished {
    job: Reserved,
    batch: Option<(Uuid, Uuid)>,
    /// For a job of a queue whose events are on: its uuid, name and attempt, for its
    /// `completed` event.
    event: Option<Completed>,
}

/// What a finished job's `completed` event says of it.
pub(crate) struct Completed {
    /// The job's uuid.
    pub(crate) uuid: String,
    /// Its name.
    pub(crate) job: String,
    /// Its attempt.
    pub(crate) attempt: u32,
}

/// Sends finished jobs to the acker.
#[derive(Clone)]
pub(crate) struct AckSender {
    sender: mpsc::UnboundedSender<Finished>,
    unacknowledged: Arc<Unacknowledged>,
}

/// How many finished jobs the acker holds, and a wake-up for those waiting until it holds
/// none.
#[derive(Default)]
struct Unacknowledged {
    count: AtomicUsize,
    none_left: Notify,
}

impl Unacknowledged {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts `done` jobs as acknowledged or given up on.
    fn remove(&self, done: usize) {
        if done == 0 {
            return;
        }
        if self.count.fetch_sub(done, Ordering::SeqCst) == done {
            self.none_left.notify_waiters();
        }
    }

    fn get(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    async fn none_left(&self) {
        loop {
            let notified = self.none_left.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so a wake-up between the two is not missed.
            notified.as_mut().enable();
            if self.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl AckSender {
    /// Queues a finished job's reservation for deletion.
    pub(crate) fn ack(&self, job: Reserved, event: Option<Completed>) {
        self.send(Finished {
            job,
            batch: None,
            event,
        });
    }

    /// Queues a finished job of the batch `batch` for deletion and counting there.
    pub(crate) fn ack_in_batch(&self, job: Reserved, batch: Uuid, uuid: Uuid) {
        self.send(Finished {
            job,
            batch: Some((batch, uuid)),
            event: None,
        });
    }

    fn send(&self, finished: Finished) {
        self.unacknowledged.add();
        if self.sender.send(finished).is_err() {
            self.unacknowledged.remove(1);
            warn!("the acker has stopped; the job comes back after retry_after");
        }
    }

    /// How many finished jobs sent to the acker it has not yet finished deleting (or given
    /// up on).
    pub(crate) fn unacknowledged(&self) -> usize {
        self.unacknowledged.get()
    }

    /// Waits until the acker has finished with every job sent to it so far: acknowledged
    /// each (and so made what each acknowledgement makes, such as a batch's callback), or
    /// given up.
    pub(crate) async fn all_acknowledged(&self) {
        self.unacknowledged.none_left().await
    }
}

async fn run(
    queue: RedisQueue,
    durability: Durability,
    mut receiver: mpsc::UnboundedReceiver<Finished>,
    unacknowledged: Arc<Unacknowledged>,
    retry_after: Duration,
) {
    let mut pending: Vec<Finished> = Vec::with_capacity(MAX_BATCH);
    let mut pause = Pause::new(Duration::from_millis(50), Duration::from_secs(2));
    let mut closed = false;
    let mut give_up_at: Option<Instant> = None;
    loop {
        if !closed {
            closed = take_arrived(&mut receiver, &mut pending).await;
        }
        if pending.is_empty() {
            return;
        }
        let before = pending.len();
        let acknowledged = acknowledge(
            WorkerQueue::of(&queue).acknowledging(durability),
            &mut pending,
        )
        .await;
        unacknowledged.remove(before - pending.len());
        let Err(err) = acknowledged else {
            pause.reset();
            continue;
        };
        // While the worker runs, an acknowledgement is never dropped: once Redis is back it
        // is delivered, and the job does not run again unless its reservation expired and
        // the job was handed out meanwhile. A stopping worker waits for Redis only as long
        // as the reservations last.
        if closed {
            let give_up_at = *give_up_at.get_or_insert_with(|| Instant::now() + retry_after);
            if Instant::now() + pause.peek() >= give_up_at {
                warn!(
                    error = %err,
                    jobs = pending.len(),
                    "giving up: cannot acknowledge finished jobs; they come back after retry_after"
                );
                unacknowledged.remove(pending.len());
                return;
            }
        }
        warn!(
            error = %err,
            jobs = pending.len(),
            "cannot acknowledge finished jobs yet; retrying"
        );
        tokio::time::sleep(pause.take()).await;
    }
}

/// Adds the finished jobs that have arrived to `pending`, up to [`MAX_BATCH`], waiting for one
/// when none is pending. Returns whether the acker has been closed and everything sent to it
/// taken.
async fn take_arrived(
    receiver: &mut mpsc::UnboundedReceiver<Finished>,
    pending: &mut Vec<Finished>,
) -> bool {
    if pending.is_empty() {
        return receiver.recv_many(pending, MAX_BATCH).await == 0;
    }
    while pending.len() < MAX_BATCH {
        match receiver.try_recv() {
            Ok(job) => pending.push(job),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => return true,
        }
    }
    false
}

/// Deletes the reservations of `pending` jobs with one `ZREM` per queue (one script call per
/// reserved set and batch for jobs of a batch), and takes the jobs of every call that
/// succeeded out of `pending`. Stops at the first Redis error, which it returns.
async fn acknowledge(queue: WorkerQueue<'_>, pending: &mut Vec<Finished>) -> redjob::Result<()> {
    let mut done = vec![false; pending.len()];
    let mut outcome = Ok(());
    for (keys, batch, members) in calls(pending) {
        let finished: Vec<&Finished> = members.iter().map(|&at| &pending[at]).collect();
        let sent = match batch {
            None => delete(queue, keys, &finished).await,
            Some(batch) => {
                let members: Vec<(&str, Uuid)> = finished
                    .iter()
                    .map(|f| {
                        (
                            f.job.raw.as_str(),
                            f.batch.map_or(Uuid::nil(), |(_, uuid)| uuid),
                        )
                    })
                    .collect();
                queue
                    .complete_in_batch(BatchCompleteArgs {
                        queue: keys,
                        batch,
                        finished: &members,
                    })
                    .await
            }
        };
        match sent {
            Ok(held) => {
                warn_if_not_held(keys, finished.len() as u64 - held);
                for at in members {
                    done[at] = true;
                }
            }
            Err(err) => {
                outcome = Err(err);
                break;
            }
        }
    }
    let mut done = done.into_iter();
    pending.retain(|_| !done.next().unwrap_or(false));
    outcome
}

/// Deletes the reservations of `finished` jobs of no batch, all of the queue's own list or all
/// of its groups (`keys`, the first one's), with their `completed` event when each has one (the
/// queue's events are on).
async fn delete(
    queue: WorkerQueue<'_>,
    keys: &QueueKeys,
    finished: &[&Finished],
) -> redjob::Result<u64> {
    let events: Option<Vec<(&str, &str, u32)>> = finished
        .iter()
        .map(|f| {
            f.event
                .as_ref()
                .map(|e| (e.uuid.as_str(), e.job.as_str(), e.attempt))
        })
        .collect();
    let reserved: Vec<&str> = finished.iter().map(|f| f.job.raw.as_str()).collect();
    let groups: Option<Vec<&str>> = keys.group.is_some().then(|| {
        finished
            .iter()
            .map(|f| f.job.queue.group.as_deref().unwrap_or(""))
            .collect()
    });
    queue
        .delete(DeleteArgs {
            queue: keys,
            reserved: &reserved,
            groups: groups.as_deref(),
            completed: events.as_deref(),
        })
        .await
}

/// What one acknowledging call covers: a queue's own reserved set (`false`), or every group
/// of a queue (`true`: their jobs are acknowledged together, each in its group's set).
fn acknowledged_in(keys: &QueueKeys) -> (&str, bool) {
    (&keys.name, keys.group.is_some())
}

/// Whether finished jobs taken with keys `a` and `b`, of the batch `batch` or none, are
/// acknowledged by one call: jobs of no batch by [`acknowledged_in`], jobs of a batch by
/// reserved set (a batch's count is one script call per set).
fn in_one_call(a: &QueueKeys, b: &QueueKeys, batch: Option<Uuid>) -> bool {
    match batch {
        None => acknowledged_in(a) == acknowledged_in(b),
        Some(_) => a.reserved == b.reserved,
    }
}

/// One acknowledging call: the keys of its first job, its batch, and where its jobs are in
/// the pending list.
type Call<'a> = (&'a QueueKeys, Option<Uuid>, Vec<usize>);

/// The pending jobs grouped by batch and by what one call acknowledges ([`in_one_call`]).
fn calls(pending: &[Finished]) -> Vec<Call<'_>> {
    let mut calls: Vec<Call<'_>> = Vec::new();
    for (at, finished) in pending.iter().enumerate() {
        let batch = finished.batch.map(|(id, _)| id);
        let queue = &finished.job.queue;
        match calls
            .iter_mut()
            .find(|(keys, of, _)| *of == batch && in_one_call(keys, queue, batch))
        {
            Some((_, _, members)) => members.push(at),
            None => calls.push((queue, batch, vec![at])),
        }
    }
    calls
}

fn warn_if_not_held(keys: &QueueKeys, missing: u64) {
    if missing > 0 {
        warn!(
            queue = %keys.name,
            missing,
            "finished jobs whose reservations were no longer held; nothing changed for them"
        );
    }
}
