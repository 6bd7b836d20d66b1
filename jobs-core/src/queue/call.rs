//! How every queue operation talks to Redis: one call under the command timeout, made once
//! more on a fresh connection when the first met a refused one, and scripts by SHA.

use redis::{Cmd, FromRedisValue, Pipeline, ScriptInvocation};
use std::future::Future;

use crate::error::{Error, Result};
use crate::queue::connection::Connection;
use crate::queue::handle::RedisQueue;
use crate::queue::scripts;

impl RedisQueue {
    /// Runs one Redis call under the command timeout. A call that finds the connection refused
    /// was never sent, and may have met only the kept failure of a reconnection made while
    /// Redis was down; that failure starts a new reconnection. Such a call is therefore made
    /// once more, on the new connection, within the same timeout, so that the first call after
    /// Redis came back succeeds. If that one does not answer in time, the refusal is reported.
    pub(crate) async fn call<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn(Connection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + self.config.command_timeout;
        let timed_out = || Error::Timeout(self.config.command_timeout);
        match tokio::time::timeout_at(deadline, call(self.conn.clone())).await {
            Ok(Err(refused)) if refused.is_connection_refusal() => {
                match tokio::time::timeout_at(deadline, call(self.conn.clone())).await {
                    Ok(result) => result.map_err(Error::from),
                    Err(_) => Err(Error::from(refused)),
                }
            }
            Ok(result) => result.map_err(Error::from),
            Err(_) => Err(timed_out()),
        }
    }

    /// Sends one command of one's own through this handle's connection, under its command
    /// timeout, made once more on a fresh connection when the first met a refused one (a
    /// handler keeping a counter of its own, say).
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue) -> Result<(), redjob::Error> {
    /// use redjob::redis;
    /// let seen: i64 = queue.query(redis::cmd("INCR").arg("imports:seen")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        self.call(|mut conn| async move { cmd.query_async(&mut conn).await })
            .await
    }

    /// Checks that this handle can do its work: Redis answers, accepts the credentials, is
    /// 6.2 or later, and lets this user load and run scripts (`SCRIPT LOAD`, `EVALSHA`). A
    /// worker runs it before it takes a job; [`Error::is_configuration`] tells a setting to
    /// fix from a server that is not reachable yet.
    pub async fn check(&self) -> Result<()> {
        // INFO is among the commands an ACL calls dangerous: a user denied it is not checked.
        // On a cluster it answers once per primary, in a map by node: each is checked.
        let info: redis::Value = match self.query(redis::cmd("INFO").arg("server")).await {
            Err(Error::NotPermitted(_)) => redis::Value::Nil,
            other => other?,
        };
        for version in server_versions(&info) {
            let numbers: Vec<u32> = version.split('.').filter_map(|n| n.parse().ok()).collect();
            if numbers.len() >= 2 && (numbers[0], numbers[1]) < (6, 2) {
                return Err(Error::UnsupportedServer { version });
            }
        }
        // Loaded explicitly: EVALSHA alone would not try SCRIPT LOAD once the script is cached.
        self.call(|mut conn| async move { scripts::CHECK.load_async(&mut conn).await })
            .await?;
        self.invoke::<i64>(&scripts::CHECK.prepare_invoke()).await?;
        Ok(())
    }

    /// Sends a pipeline of one's own through this handle's connection, its commands in one
    /// round trip, as [`RedisQueue::query`] sends a command: under the command timeout, and
    /// once more on a fresh connection when the first met a refused one (which it was never
    /// sent on). The reply holds each command's reply in order, as a tuple or a `Vec` (a
    /// command marked `.ignore()` gives none); a command Redis refuses fails the whole call,
    /// and the others are carried out nonetheless. `.atomic()` sends the commands as one
    /// `MULTI`/`EXEC` transaction.
    ///
    /// On a Redis Cluster a pipeline goes to one node, so its keys must all be in one slot:
    /// the keys of one queue are ([`RedisQueue::queue_keys`]), and keys of one's own share a
    /// slot when they share a hash tag (`{tenant:7}:seen`, `{tenant:7}:last`). One that
    /// crosses slots fails (`CROSSSLOT`); commands over keys of many slots go through
    /// [`RedisQueue::query_each`].
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue) -> Result<(), redjob::Error> {
    /// use redjob::redis;
    /// let keys = queue.queue_keys("emails");
    /// let mut pipe = redis::pipe();
    /// pipe.llen(&keys.ready).zcard(&keys.delayed);
    /// let (ready, delayed): (u64, u64) = queue.query_pipe(&pipe).await?;
    /// # let _ = (ready, delayed); Ok(()) }
    /// ```
    pub async fn query_pipe<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T> {
        self.call(|mut conn| async move { pipe.query_async(&mut conn).await })
            .await
    }

    /// Calls one script by its SHA, loading it first if the server lacks it.
    pub(crate) async fn invoke<T: FromRedisValue>(&self, call: &ScriptInvocation<'_>) -> Result<T> {
        self.call(|mut conn| async move { call.invoke_async(&mut conn).await })
            .await
    }

    /// Sends script calls in one pipeline, preceded by `SCRIPT LOAD` of the `scripts` they
    /// use, so that none of them meets `NOSCRIPT` (a restarted or flushed server). Returns
    /// each call's reply, in order.
    ///
    /// A pipeline's `EVALSHA` does not load its script by itself, and sending the pipeline
    /// again after a `NOSCRIPT` would run the calls that had succeeded a second time.
    pub(crate) async fn invoke_all<T: FromRedisValue>(
        &self,
        scripts: &[&redis::Script],
        calls: &[ScriptInvocation<'_>],
    ) -> Result<Vec<T>> {
        match calls {
            [] => return Ok(Vec::new()),
            [single] => return self.invoke::<T>(single).await.map(|reply| vec![reply]),
            _ => {}
        }
        self.query_pipe(&script_pipe(scripts, calls)).await
    }

    /// Sends script calls in one pipeline, as [`RedisQueue::invoke_all`] does, and returns each
    /// call's own outcome: a call Redis refuses (a key of another type, say) is an `Err` in
    /// its place, and the others' replies stand. Fails as a whole only when the pipeline
    /// does (the connection).
    #[cfg(feature = "postgres")]
    pub(crate) async fn invoke_each(
        &self,
        scripts: &[&redis::Script],
        calls: &[ScriptInvocation<'_>],
    ) -> Result<Vec<redis::RedisResult<redis::Value>>> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = script_pipe(scripts, calls);
        pipe.ignore_errors();
        self.query_pipe(&pipe).await
    }

    /// Runs one Redis call under the command timeout, without the retry on a refused
    /// connection ([`RedisQueue::call`]).
    pub(crate) async fn timed<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.config.command_timeout, call).await {
            Ok(result) => result.map_err(Error::from),
            Err(_) => Err(Error::Timeout(self.config.command_timeout)),
        }
    }
}

/// A pipeline that loads `scripts`, then makes `calls`.
fn script_pipe(scripts: &[&redis::Script], calls: &[ScriptInvocation<'_>]) -> Pipeline {
    let mut pipe = Pipeline::with_capacity(scripts.len() + calls.len());
    for script in scripts {
        pipe.load_script(script).ignore();
    }
    for call in calls {
        pipe.invoke_script(call);
    }
    pipe
}

/// The `redis_version` of each server in an `INFO server` reply: one text, or on a cluster a
/// map of them by node.
fn server_versions(info: &redis::Value) -> Vec<String> {
    match info {
        redis::Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(_, value)| server_versions(value))
            .collect(),
        other => redis::InfoDict::from_redis_value_ref(other)
            .ok()
            .and_then(|info| info.get::<String>("redis_version"))
            .into_iter()
            .collect(),
    }
}
