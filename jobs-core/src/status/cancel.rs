//! Cancelling a job from any process (`cancel.lua`).

use uuid::Uuid;

use crate::error::Result;
use crate::queue::events::xadd;
use crate::queue::keys::KeyLayout;
use crate::queue::scripts;
use crate::queue::RedisQueue;
use crate::status::record::JobState;
use crate::status::CANCEL_TTL;

/// What a cancel request found, and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// The job was waiting (queued, delayed, or released to run again): it is settled as
    /// cancelled, without running, when a worker reaches it.
    Waiting(JobState),
    /// The job was running: its handler sees [`JobContext::cancelled`] fire, and is stopped
    /// after the worker's grace if it goes on.
    ///
    /// [`JobContext::cancelled`]: crate::JobContext::cancelled
    Running,
    /// The job had already settled for good, in this state: nothing changed.
    Finished(JobState),
    /// Nothing is known of the job (it is not tracked, or its record expired): the request
    /// stands, so that it does not run if it is waiting anywhere, and stops if it runs.
    Unknown,
}

impl Cancelled {
    /// What the request found, as the tools name it: `waiting`, `running`, `finished` or
    /// `unknown`.
    pub fn found(&self) -> &'static str {
        match self {
            Cancelled::Waiting(_) => "waiting",
            Cancelled::Running => "running",
            Cancelled::Finished(_) => "finished",
            Cancelled::Unknown => "unknown",
        }
    }

    /// The job's state when the request was made, when it is known.
    pub fn state(&self) -> Option<JobState> {
        match *self {
            Cancelled::Waiting(state) | Cancelled::Finished(state) => Some(state),
            Cancelled::Running => Some(JobState::Running),
            Cancelled::Unknown => None,
        }
    }

    /// Whether the request stands: nothing changes for a job that had finished.
    pub fn requested(&self) -> bool {
        !matches!(self, Cancelled::Finished(_))
    }
}

impl RedisQueue {
    /// Asks the job `uuid` to stop, whatever its queue and wherever it runs. A job that
    /// settled for good is left alone. Its outcome, once a worker acts, is "cancelled": it is
    /// not retried, its `failed()` hook runs with that reason, and its chain or batch counts
    /// it as failed.
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue, uuid: uuid::Uuid) -> redjob::Result<()> {
    /// use redjob::status::Cancelled;
    /// match queue.cancel(uuid).await? {
    ///     Cancelled::Finished(state) => println!("too late: the job is {state}"),
    ///     other => println!("cancelling: {other:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, uuid: Uuid) -> Result<Cancelled> {
        let uuid = uuid.to_string();
        let state = match self.layout() {
            KeyLayout::Standalone => {
                let keys = self.keys();
                let mut call = scripts::CANCEL.key(keys.status(&uuid));
                call.key(keys.cancel_requests())
                    .key(keys.cancel_signals())
                    .key(keys.failed_jobs())
                    .arg(&uuid)
                    .arg(CANCEL_TTL.as_millis() as u64);
                self.invoke::<String>(&call).await?
            }
            KeyLayout::Cluster => self.cancel_on_cluster(&uuid).await?,
        };
        Ok(match JobState::parse(&state) {
            _ if state.is_empty() => Cancelled::Unknown,
            final_state if final_state.is_final() => Cancelled::Finished(final_state),
            JobState::Running => Cancelled::Running,
            waiting => Cancelled::Waiting(waiting),
        })
    }

    /// [`cancel.lua`]'s steps on a cluster, whose keys live in different slots: each a
    /// command of its own. A job that settles between the reading and the flagging leaves a
    /// request that is pruned after [`CANCEL_TTL`].
    async fn cancel_on_cluster(&self, uuid: &str) -> Result<String> {
        let keys = self.keys();
        let state: Option<String> = self
            .query(redis::cmd("HGET").arg(keys.status(uuid)).arg("state"))
            .await?;
        let state = state.unwrap_or_default();
        if state.is_empty() {
            let failed: bool = self
                .query(redis::cmd("HEXISTS").arg(keys.failed_jobs()).arg(uuid))
                .await?;
            if failed {
                return Ok("failed".to_owned());
            }
        }
        if JobState::parse(&state).is_final() {
            return Ok(state);
        }
        let now = chrono::Utc::now().timestamp_millis();
        let flag = redis::cmd("ZADD")
            .arg(keys.cancel_requests())
            .arg(now)
            .arg(uuid)
            .clone();
        let signal = xadd(&keys.cancel_signals(), 1000, &[("uuid", uuid)]);
        self.query_each::<()>(&[flag, signal]).await?;
        Ok(state)
    }
}
