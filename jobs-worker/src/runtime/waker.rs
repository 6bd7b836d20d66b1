//! The waker: an idle worker's blocking wait for pushed jobs.
//!
//! It owns a dedicated connection and, each time the worker goes idle, runs one `BLPOP` on the
//! notify lists of all the worker's queues. A push wakes it at once. The BLPOP stays in flight
//! across the worker's other waits (a due delayed job, a stop signal), so no push is missed;
//! the token it takes is only a hint, and the pop script keeps one token per ready job. A token
//! that arrives while the worker is no longer waiting (busy, or stopping) is pushed back, so
//! that another idle worker wakes for it.
//!
//! On a single server a worker of one queue sends a pop of it behind the BLPOP, in the same
//! pipeline ([`Waker::arm`]): Redis runs it the moment the BLPOP is served, so a job pushed to
//! an idle worker is reserved without another round trip. Its jobs reach the job loop through
//! [`Waker::popped`]. When the worker stops waiting for another reason, the job loop ends the
//! BLPOP at once (`CLIENT UNBLOCK`, [`Waker::hurry_pop`]), so that the pop runs now as its next
//! pop, and no pop stays behind a wait to reserve jobs for a busy worker, or behind a
//! connection that a stop closes. A user whose ACL denies `CLIENT UNBLOCK` gets no pop behind
//! its BLPOP.
//!
//! A Redis Cluster refuses a BLPOP over keys of different slots (`CROSSSLOT`), and each queue
//! has a slot of its own there. On a cluster the waker therefore runs one listener per queue,
//! each with its own connection and its own BLPOP, all armed together; the first to return
//! wakes the worker. No pop goes behind them.
//!
//! Paused queues are left out of every BLPOP: their tokens stay where they are, for when they
//! are resumed.

use futures_util::FutureExt;
use redjob::__worker::{WaitArgs, WorkerQueue};
use redjob::queue::connection::Connection;
use redjob::queue::keys::{KeyLayout, QueueKeys};
use redjob::RedisQueue;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tracing::{debug, warn};

use crate::runtime::control::Control;
use crate::runtime::fetcher::{Fetched, PopBehind};
use crate::runtime::outage::{Pause, TAKING_PAUSE_MAX};

/// How long [`Waker::hurry_pop`] first waits for the pop before it asks Redis again to end
/// the BLPOP, in case its request reached the server before the BLPOP did; each wait doubles,
/// up to [`UNBLOCK_AT_MOST_EVERY`].
const UNBLOCK_AGAIN_AFTER: Duration = Duration::from_millis(1);

/// The longest wait between two requests to end the BLPOP.
const UNBLOCK_AT_MOST_EVERY: Duration = Duration::from_millis(50);

/// How long a connection may take to open, and to answer past a BLPOP's own timeout, before it
/// counts as dead.
const SILENCE: Duration = Duration::from_secs(5);

/// Handle to the waker's listener tasks.
pub(crate) struct Waker {
    queue: RedisQueue,
    shared: Arc<Shared>,
    listeners: Vec<Arc<Listener>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    block_for: Duration,
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
    /// Whether a pop may go behind its BLPOP (a single server).
    pops: bool,
    /// The pop behind its BLPOP, from the job loop's asking to the job loop's taking.
    pop: Mutex<PopState>,
    /// A pop came back ([`PopState::Done`]); wakes only those already waiting, who look at
    /// `pop` after registering, so that no wake-up is left over for a later pop.
    pop_done: Notify,
    /// The connection's id on the server, for `CLIENT UNBLOCK` (`None`: not connected yet, or
    /// this user may not unblock it; then no pop goes behind its BLPOP).
    client_id: Mutex<Option<i64>>,
}

impl Listener {
    /// Hands the job loop the pop `state` guards as back: what it reserved, `None` when it did
    /// not run.
    fn pop_back_now(&self, mut state: MutexGuard<'_, PopState>, popped: Option<Fetched>) {
        *state = PopState::Done(popped);
        drop(state);
        self.pop_done.notify_waiters();
    }
}

/// Where the pop behind a listener's BLPOP is.
#[derive(Default)]
enum PopState {
    /// None is asked for.
    #[default]
    None,
    /// Asked for, to go behind the next BLPOP.
    Asked(PopBehind),
    /// Sent behind a BLPOP in flight.
    Sent,
    /// Back, until the job loop takes it: what it reserved (`None`: it did not run, or its
    /// reply was lost).
    Done(Option<Fetched>),
}

impl PopState {
    /// What a pop that is back reserved, leaving no pop; `None` while one is asked for or out.
    fn take_done(&mut self) -> Option<Option<Fetched>> {
        match std::mem::take(self) {
            PopState::Done(popped) => Some(popped),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The pop asked for, now on its way ([`PopState::Sent`]); `None` when none is asked for.
    fn send(&mut self) -> Option<PopBehind> {
        match std::mem::replace(self, PopState::Sent) {
            PopState::Asked(pop) => Some(pop),
            other => {
                *self = other;
                None
            }
        }
    }
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
        let pops = queue.layout() == KeyLayout::Standalone;
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
                pops,
                pop: Mutex::new(PopState::None),
                pop_done: Notify::new(),
                client_id: Mutex::new(None),
            });
            tasks.push(tokio::spawn(listen(
                queue.clone(),
                keys,
                block_for,
                control.clone(),
                shared.clone(),
                listener.clone(),
            )));
            listeners.push(listener);
        }
        Waker {
            queue: queue.clone(),
            shared,
            listeners,
            tasks,
            block_for,
        }
    }

    /// Starts a BLPOP on every listener that has none in flight. Where the waker is on a single
    /// server and no pop is out, the pop that `behind` makes goes behind that BLPOP. Returns
    /// how many jobs that pop may reserve (0: none was asked for); it comes back through
    /// [`Waker::popped`]. Where the waker may not end the BLPOP early ([`Waker::hurry_pop`]),
    /// the pop is not sent, and comes back as not run.
    pub(crate) fn arm(&self, behind: impl FnOnce() -> Option<PopBehind>) -> usize {
        let mut behind = Some(behind);
        let mut asked = 0;
        for listener in &self.listeners {
            if listener.armed.swap(true, Ordering::AcqRel) {
                continue;
            }
            if listener.pops {
                let mut state = lock(&listener.pop);
                if matches!(*state, PopState::None) {
                    if let Some(pop) = behind.take().and_then(|make| make()) {
                        asked = pop.count();
                        *state = PopState::Asked(pop);
                    }
                }
            }
            listener.arm.notify_one();
        }
        asked
    }

    /// Waits until a job may have been pushed: a token arrived, or a BLPOP timed out or
    /// failed.
    pub(crate) async fn wait(&self) {
        let woke = self.shared.woke.notified();
        let _waiting = Waiting::start(&self.shared);
        woke.await;
    }

    /// What the pop asked for by [`Waker::arm`] reserved, once it is back: `None` when it did
    /// not run or its reply was lost (a user who may not end a BLPOP early, a server that lost
    /// its scripts, a broken connection). Waits while it is on its way.
    pub(crate) async fn popped(&self) -> Option<Fetched> {
        let Some(listener) = self.pop_listener() else {
            return std::future::pending().await;
        };
        loop {
            let done = listener.pop_done.notified();
            if let Some(popped) = lock(&listener.pop).take_done() {
                return popped;
            }
            done.await;
        }
    }

    /// Takes back the pop asked for by [`Waker::arm`] for a stop, and returns what it
    /// reserved ([`Waker::hurry_pop`]).
    pub(crate) async fn cancel_pop(&self) -> Option<Fetched> {
        self.hurry_pop().await;
        self.popped().now_or_never().flatten()
    }

    /// Has the pop asked for by [`Waker::arm`] come back now, for [`Waker::popped`] to take.
    /// One not sent yet is not sent, and comes back as not run. One sent behind a BLPOP ends
    /// that BLPOP at once (`CLIENT UNBLOCK`, as if it had timed out), so that it runs now; the
    /// request is made again until the BLPOP has ended, in case it reached the server before
    /// the BLPOP did. Gives up when Redis cannot be reached, or after the BLPOP's own timeout
    /// and the connection's.
    pub(crate) async fn hurry_pop(&self) {
        let Some(listener) = self.pop_listener() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + self.block_for + SILENCE;
        let mut again_after = UNBLOCK_AGAIN_AFTER;
        loop {
            let done = listener.pop_done.notified();
            let client_id = {
                let state = lock(&listener.pop);
                match &*state {
                    PopState::None | PopState::Done(_) => return,
                    PopState::Asked(_) => return listener.pop_back_now(state, None),
                    PopState::Sent => *lock(&listener.client_id),
                }
            };
            if let Some(id) = client_id {
                let unblocked: redjob::Result<i64> = self
                    .queue
                    .query(redis::cmd("CLIENT").arg("UNBLOCK").arg(id))
                    .await;
                if let Err(err) = unblocked {
                    // Redis cannot be reached: the BLPOP's connection fails too, in its own
                    // time, and the pop comes back as not run.
                    debug!(error = %err, "cannot end the wait for jobs early");
                    return;
                }
            }
            let wait =
                again_after.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            again_after = (again_after * 2).min(UNBLOCK_AT_MOST_EVERY);
            if tokio::time::timeout(wait, done).await.is_err()
                && tokio::time::Instant::now() >= deadline
            {
                return;
            }
        }
    }

    /// The listener a pop may go behind: the only one, on a single server.
    fn pop_listener(&self) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.pops).map(|l| &**l)
    }
}

/// Locks `mutex`: what it guards is whole between any two statements, so a panic elsewhere
/// leaves it usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The id of the connection `conn` on its server, when this user may end a wait on it with
/// `CLIENT UNBLOCK` (an ACL with `-@dangerous` denies it): only then may a pop go behind its
/// BLPOP, since a stop must be able to end that BLPOP and take the pop's jobs.
async fn unblockable_id(conn: &mut Connection) -> Option<i64> {
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(conn)
        .await
        .ok()?;
    // Unblocking a connection that is not blocked changes nothing: a check of the permission.
    let permitted: redis::RedisResult<i64> = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(id)
        .query_async(conn)
        .await;
    permitted.ok().map(|_| id)
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
    queue: RedisQueue,
    queues: Vec<Arc<QueueKeys>>,
    block_for: Duration,
    control: Arc<Control>,
    shared: Arc<Shared>,
    listener: Arc<Listener>,
) {
    let mut conn: Option<Connection> = None;
    let mut pause = Pause::new(Duration::from_millis(100), TAKING_PAUSE_MAX);
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
                return Ok(None);
            }
            if conn.is_none() {
                // A BLPOP answers within its own timeout; a longer silence is a dead connection.
                let mut fresh = queue
                    .target()
                    .dedicated(SILENCE, block_for + SILENCE)
                    .await?;
                if listener.pops {
                    *lock(&listener.client_id) = unblockable_id(&mut fresh).await;
                }
                conn = Some(fresh);
            }
            let conn = conn.as_mut().expect("connected above");
            let behind = send_behind(&listener);
            let pop = behind.as_ref().map(PopBehind::args);
            let woken = WorkerQueue::of(&queue)
                .wait_then_pop(WaitArgs {
                    conn,
                    wait_on: &keys,
                    block_for,
                    pop,
                })
                .await?;
            let popped = behind
                .zip(woken.popped)
                .map(|(behind, popped)| behind.fetched(popped));
            let token = woken.token;
            // Jobs the pop reserved are this worker's now, started in the slots the job loop
            // holds for them: their token is spent.
            let reserved = popped.as_ref().is_some_and(|p| !p.jobs.is_empty());
            if let Some((key, token)) = token {
                if !reserved && !shared.waiting.load(Ordering::Acquire) {
                    redis::cmd("RPUSH")
                        .arg(key)
                        .arg(token)
                        .query_async::<()>(conn)
                        .await?;
                }
            }
            Ok::<_, redjob::Error>(popped)
        }
        .await;
        let popped = match result {
            Ok(popped) => {
                pause.reset();
                popped
            }
            Err(err) => {
                warn!(error = %err, "waiting for jobs failed; reconnecting");
                conn = None;
                *lock(&listener.client_id) = None;
                tokio::time::sleep(pause.take()).await;
                None
            }
        };
        pop_back(&listener, popped);
        listener.armed.store(false, Ordering::Release);
        shared.woke.notify_one();
    }
}

/// The pop to send behind this round's BLPOP: the one asked for, when the connection can be
/// unblocked; one that cannot be sent comes back as not run at once.
fn send_behind(listener: &Listener) -> Option<PopBehind> {
    let mut state = lock(&listener.pop);
    let pop = state.send()?;
    if lock(&listener.client_id).is_some() {
        return Some(pop);
    }
    listener.pop_back_now(state, None);
    None
}

/// Hands the job loop what the pop asked for before this round reserved: what it reserved if
/// it was sent, and as not run if the round ended before sending it (a connection that could
/// not be made). A pop is only asked for between rounds ([`Waker::arm`]).
fn pop_back(listener: &Listener, popped: Option<Fetched>) {
    let state = lock(&listener.pop);
    if matches!(*state, PopState::Sent | PopState::Asked(_)) {
        listener.pop_back_now(state, popped);
    }
}
