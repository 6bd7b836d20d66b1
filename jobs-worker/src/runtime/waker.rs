//! The waker: an idle worker's blocking wait for pushed jobs.
//!
//! It owns a dedicated connection and, each time the worker goes idle, runs one `BLPOP` on the
//! notify lists of all the worker's queues. A push wakes it at once. The BLPOP stays in flight
//! across the worker's other waits (a due delayed job, a stop signal), so no push is missed;
//! the token it takes is only a hint, and the pop script keeps one token per ready job. A token
//! that arrives while the worker is no longer waiting (busy, or stopping) is pushed back, so
//! that another idle worker wakes for it.
//!
//! A Redis Cluster refuses a BLPOP over keys of different slots (`CROSSSLOT`), and each queue
//! has a slot of its own there. On a cluster the waker therefore runs one listener per queue,
//! each with its own connection and its own BLPOP, all armed together; the first to return
//! wakes the worker.
//!
//! Paused queues are left out of every BLPOP: their tokens stay where they are, for when they
//! are resumed.

use redjob::queue::connection::{Connection, Target};
use redjob::queue::keys::{KeyLayout, QueueKeys};
use redjob::RedisQueue;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tracing::warn;

use crate::runtime::control::Control;
use crate::runtime::outage::Pause;

/// Handle to the waker's listener tasks.
pub(crate) struct Waker {
    shared: Arc<Shared>,
    listeners: Vec<Arc<Listener>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What the worker and every listener share.
struct Shared {
    waiting: AtomicBool,
    woke: Notify,
}

/// One BLPOP loop over a set of notify lists that Redis accepts in one command.
struct Listener {
    armed: AtomicBool,
    arm: Notify,
}

impl Waker {
    /// Starts the waker for `queues`, talking to the Redis behind `queue` and leaving out the
    /// queues `control` says are paused; each BLPOP waits at most `block_for`.
    pub(crate) fn start(
        queue: &RedisQueue,
        queues: &[Arc<QueueKeys>],
        block_for: Duration,
        control: Arc<Control>,
    ) -> Self {
        let shared = Arc::new(Shared {
            waiting: AtomicBool::new(false),
            woke: Notify::new(),
        });
        let key_sets: Vec<Vec<Arc<QueueKeys>>> = match queue.layout() {
            KeyLayout::Standalone => vec![queues.to_vec()],
            KeyLayout::Cluster => queues.iter().map(|q| vec![q.clone()]).collect(),
        };
        let mut listeners = Vec::with_capacity(key_sets.len());
        let mut tasks = Vec::with_capacity(key_sets.len());
        for keys in key_sets {
            let listener = Arc::new(Listener {
                armed: AtomicBool::new(false),
                arm: Notify::new(),
            });
            tasks.push(tokio::spawn(listen(
                queue.target().clone(),
                keys,
                block_for,
                control.clone(),
                shared.clone(),
                listener.clone(),
            )));
            listeners.push(listener);
        }
        Waker {
            shared,
            listeners,
            tasks,
        }
    }

    /// Waits until a job may have been pushed: a token arrived, or a BLPOP timed out or
    /// failed. Starts a BLPOP on every listener that has none in flight.
    pub(crate) async fn wait(&self) {
        let woke = self.shared.woke.notified();
        let _waiting = Waiting::start(&self.shared);
        for listener in &self.listeners {
            if !listener.armed.swap(true, Ordering::AcqRel) {
                listener.arm.notify_one();
            }
        }
        woke.await;
    }
}

/// Marks the worker as waiting while it lives.
struct Waiting<'a>(&'a Shared);

impl<'a> Waiting<'a> {
    fn start(shared: &'a Shared) -> Self {
        shared.waiting.store(true, Ordering::Release);
        Waiting(shared)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.store(false, Ordering::Release);
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn listen(
    target: Target,
    queues: Vec<Arc<QueueKeys>>,
    block_for: Duration,
    control: Arc<Control>,
    shared: Arc<Shared>,
    listener: Arc<Listener>,
) {
    let mut conn: Option<Connection> = None;
    let mut pause = Pause::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        listener.arm.notified().await;
        let keys: Vec<&str> = queues
            .iter()
            .filter(|q| !control.is_paused(&q.name))
            .map(|q| q.notify.as_str())
            .collect();
        let result = async {
            if keys.is_empty() {
                tokio::time::sleep(block_for).await;
                return Ok(());
            }
            if conn.is_none() {
                // A BLPOP answers within its own timeout; a longer silence is a dead connection.
                conn = Some(
                    target
                        .dedicated(Duration::from_secs(5), block_for + Duration::from_secs(5))
                        .await?,
                );
            }
            let conn = conn.as_mut().expect("connected above");
            let popped: Option<(String, String)> = redis::cmd("BLPOP")
                .arg(&keys)
                .arg(block_for.as_secs_f64().max(0.01))
                .query_async(conn)
                .await?;
            if let Some((key, token)) = popped {
                if !shared.waiting.load(Ordering::Acquire) {
                    redis::cmd("RPUSH")
                        .arg(key)
                        .arg(token)
                        .query_async::<()>(conn)
                        .await?;
                }
            }
            Ok::<_, redis::RedisError>(())
        }
        .await;
        if let Err(err) = result {
            warn!(error = %err, "waiting for jobs failed; reconnecting");
            conn = None;
            tokio::time::sleep(pause.take()).await;
        } else {
            pause.reset();
        }
        listener.armed.store(false, Ordering::Release);
        shared.woke.notify_one();
    }
}
