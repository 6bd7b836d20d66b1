//! The waker: an idle worker's blocking wait for pushed jobs.
//!
//! It owns a dedicated connection and, each time the worker goes idle, runs one `BLPOP` on the
//! notify lists of all the worker's queues. A push wakes it at once. The BLPOP stays in flight
//! across the worker's other waits (a due delayed job, a stop signal), so no push is missed;
//! the token it takes is only a hint, and the pop script keeps one token per ready job. A token
//! that arrives while the worker is no longer waiting (busy, or stopping) is pushed back, so
//! that another idle worker wakes for it.

use jobs_core::keys::QueueKeys;
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tracing::warn;

use crate::retry::Pause;

/// Handle to the waker task.
pub struct Waker {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    armed: AtomicBool,
    waiting: AtomicBool,
    arm: Notify,
    woke: Notify,
}

impl Waker {
    /// Starts the waker for `queues`; each BLPOP waits at most `block_for`.
    pub fn start(client: redis::Client, queues: &[Arc<QueueKeys>], block_for: Duration) -> Self {
        let shared = Arc::new(Shared {
            armed: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            arm: Notify::new(),
            woke: Notify::new(),
        });
        let keys: Vec<String> = queues.iter().map(|q| q.notify.clone()).collect();
        let task = tokio::spawn(run(client, keys, block_for, shared.clone()));
        Waker { shared, task }
    }

    /// Waits until a job may have been pushed: a token arrived, or the BLPOP timed out or
    /// failed. Starts a BLPOP unless one is already in flight.
    pub async fn wait(&self) {
        let woke = self.shared.woke.notified();
        let _waiting = Waiting::start(&self.shared);
        if !self.shared.armed.swap(true, Ordering::AcqRel) {
            self.shared.arm.notify_one();
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
        self.task.abort();
    }
}

async fn run(client: redis::Client, keys: Vec<String>, block_for: Duration, shared: Arc<Shared>) {
    let mut conn: Option<MultiplexedConnection> = None;
    let mut pause = Pause::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        shared.arm.notified().await;
        let result = async {
            if conn.is_none() {
                // A BLPOP answers within its own timeout; a longer silence is a dead connection.
                let config = AsyncConnectionConfig::new()
                    .set_response_timeout(Some(block_for + Duration::from_secs(5)))
                    .set_connection_timeout(Some(Duration::from_secs(5)));
                conn = Some(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
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
        shared.armed.store(false, Ordering::Release);
        shared.woke.notify_one();
    }
}
