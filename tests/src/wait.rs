//! Waiting for conditions instead of sleeping: polls with a deadline that panics naming what
//! was awaited and where.

use std::fmt::Display;
use std::future::Future;
use std::panic::Location;
use std::time::Duration;

/// Polls `condition` every 15 ms until it holds; panics, naming `what` and the caller, when
/// `timeout` passes first.
///
/// ```no_run
/// # async fn demo(queue: redjob::RedisQueue) {
/// use std::time::Duration;
/// tests::wait_until(Duration::from_secs(5), "queue q is empty", || async {
///     queue.size("q").await.unwrap().total() == 0
/// })
/// .await;
/// # }
/// ```
#[track_caller]
pub fn wait_until<F, Fut>(
    timeout: Duration,
    what: impl Display,
    mut condition: F,
) -> impl Future<Output = ()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let caller = Location::caller();
    async move {
        poll(timeout, &what, caller, || {
            let check = condition();
            async move { check.await.then_some(()) }
        })
        .await
    }
}

/// Polls `probe` every 15 ms until it returns `Some`, and returns that value; panics, naming
/// `what` and the caller, when `timeout` passes first.
#[track_caller]
pub fn wait_for<T, F, Fut>(
    timeout: Duration,
    what: impl Display,
    probe: F,
) -> impl Future<Output = T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let caller = Location::caller();
    async move { poll(timeout, &what, caller, probe).await }
}

async fn poll<T, F, Fut>(
    timeout: Duration,
    what: &dyn Display,
    caller: &Location<'_>,
    mut probe: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting until {what} (at {caller})");
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}

/// Waits until a worker on the server behind `conn` is idle: blocked in `BLPOP` on its
/// queues' notify lists. Returns the blocked connection's address (`ip:port`), as `CLIENT
/// LIST` and `MONITOR` show it. Panics after `timeout`.
#[track_caller]
pub fn wait_for_idle_worker(
    conn: &redis::aio::MultiplexedConnection,
    timeout: Duration,
) -> impl Future<Output = String> + '_ {
    wait_for(
        timeout,
        "a worker is blocked on its notify lists",
        move || blocked_in_blpop(conn),
    )
}

/// The address (`ip:port`) of a connection blocked in `BLPOP` on the server behind `conn`, as
/// `CLIENT LIST` shows it; `None` when none is.
pub async fn blocked_in_blpop(conn: &redis::aio::MultiplexedConnection) -> Option<String> {
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn.clone())
        .await
        .expect("CLIENT LIST answers");
    let blocked = clients
        .lines()
        .find(|client| client.contains(" cmd=blpop ") && client.contains(" flags=b "))?;
    let addr = blocked
        .split(' ')
        .find_map(|field| field.strip_prefix("addr="))
        .expect("CLIENT LIST gives each client's addr");
    Some(addr.to_string())
}

/// Waits until the queue `name` holds no job, ready, delayed or reserved: a job's handler, or
/// the worker's log line saying it is done, comes a moment before its acknowledgement lands.
/// Panics after `timeout`.
#[track_caller]
pub fn wait_for_empty_queue<'a>(
    queue: &'a redjob::RedisQueue,
    name: &'a str,
    timeout: Duration,
) -> impl Future<Output = ()> + 'a {
    wait_until(
        timeout,
        format!("queue {name} is empty"),
        move || async move { queue.size(name).await.expect("the queue's size").total() == 0 },
    )
}
