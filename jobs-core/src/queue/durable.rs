//! The lane of durable writes ([`crate::queue::durability`]): a connection of its own per
//! handle, where each write is followed by a `WAIT` shared by the writes in flight together.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::queue::durability::{Durability, NotDurable};
use crate::queue::handle::RedisQueue;

/// How a durable write fared: the replicas confirmed it, or not ([`NotDurable`], its jobs
/// left for the caller to name).
pub(crate) type Confirmation = std::result::Result<(), NotDurable>;

/// A handle's lane for durable writes: its connection, and what its last `WAIT` covered.
/// Stored in the handle's extensions, so that the handle's clones share it.
#[derive(Default)]
struct Lane {
    current: Mutex<Option<LaneHandle>>,
    /// Connections made so far: each one's generation.
    generations: AtomicU64,
    /// Writes done on the lane so far: each one's stamp, taken once its reply is in.
    written: AtomicU64,
    /// Held while a `WAIT` is on its way, with the answer of the last one.
    covered: tokio::sync::Mutex<Covered>,
}

#[derive(Clone)]
struct LaneHandle {
    generation: u64,
    queue: RedisQueue,
}

/// What the last `WAIT` of a lane said: on which connection, for the writes stamped up to
/// `through`, asked for how many replicas within how long, and how many confirmed.
#[derive(Default)]
struct Covered {
    generation: u64,
    through: u64,
    asked: Option<Durability>,
    confirmed: u32,
}

impl Covered {
    /// What this `WAIT`'s answer says of a write stamped `stamp` on connection `generation`
    /// that needs `durability`; `None` when it does not tell (another `WAIT` is needed).
    fn verdict(&self, generation: u64, stamp: u64, durability: Durability) -> Option<Confirmation> {
        let asked = self.asked?;
        if self.generation != generation || self.through < stamp {
            return None;
        }
        if self.confirmed >= durability.replicas {
            return Some(Ok(()));
        }
        // Fewer confirmed after a wait at least as demanding and as long as this one's.
        (asked.replicas >= durability.replicas && asked.timeout >= durability.timeout).then(|| {
            Err(NotDurable {
                wanted: durability.replicas,
                confirmed: Some(self.confirmed),
                timeout: durability.timeout,
                jobs: Vec::new(),
            })
        })
    }
}

impl Lane {
    fn current(&self) -> Option<LaneHandle> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.clone()
    }

    /// The lane's handle, on a connection of its own made now when there is none.
    async fn handle(&self, queue: &RedisQueue) -> Result<LaneHandle> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let timeout = queue.config.command_timeout;
        // A WAIT answers within its own timeout, which the call's deadline covers.
        let conn = queue
            .timed(queue.target().pinned(timeout, LONGEST_SILENCE))
            .await?;
        let handle = LaneHandle {
            generation: self.generations.fetch_add(1, Ordering::Relaxed) + 1,
            queue: queue.on_connection(conn),
        };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(current.get_or_insert(handle).clone())
    }

    /// Drops the connection of `generation` after an error, unless a newer one replaced it.
    fn drop_connection(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|c| c.generation == generation) {
            *current = None;
        }
    }

    /// Waits until the write stamped `stamp` on connection `generation` has `durability`.
    async fn confirm(&self, generation: u64, stamp: u64, durability: Durability) -> Confirmation {
        let lost = || NotDurable {
            wanted: durability.replicas,
            confirmed: None,
            timeout: durability.timeout,
            jobs: Vec::new(),
        };
        let mut covered = self.covered.lock().await;
        if let Some(verdict) = covered.verdict(generation, stamp, durability) {
            return verdict;
        }
        let Some(lane) = self.current().filter(|c| c.generation == generation) else {
            return Err(lost());
        };
        let through = self.written.load(Ordering::Acquire);
        let wait = redis::cmd("WAIT")
            .arg(durability.replicas)
            .arg(durability.timeout.as_millis().max(1) as u64)
            .to_owned();
        let deadline = durability.timeout + lane.queue.config.command_timeout;
        let mut conn = lane.queue.conn.clone();
        let answer = tokio::time::timeout(deadline, wait.query_async::<u32>(&mut conn)).await;
        match answer {
            Ok(Ok(confirmed)) => {
                *covered = Covered {
                    generation,
                    through,
                    asked: Some(durability),
                    confirmed,
                };
                covered
                    .verdict(generation, stamp, durability)
                    .unwrap_or(Err(lost()))
            }
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "WAIT for replicas failed; the durable lane reconnects");
                self.drop_connection(generation);
                Err(lost())
            }
            Err(_) => {
                self.drop_connection(generation);
                Err(lost())
            }
        }
    }
}

/// The silence after which the lane's connection counts as dead: longer than any `WAIT` a
/// caller sensibly asks for; each call has its own deadline besides.
const LONGEST_SILENCE: Duration = Duration::from_secs(300);

impl RedisQueue {
    /// Runs `write` on this handle's durable lane (a handle on the lane's connection is
    /// passed to it), then waits until `durability` holds for it. With no replicas asked for,
    /// `write` runs on this handle itself. `write`'s own error is returned as it is; its
    /// outcome comes with whether the replicas confirmed it.
    pub(crate) async fn durably<T, F, Fut>(
        &self,
        durability: Durability,
        write: F,
    ) -> Result<(T, Confirmation)>
    where
        F: FnOnce(RedisQueue) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if durability.is_none() || self.is_offline() {
            return Ok((write(self.clone()).await?, Ok(())));
        }
        let lane = self.extensions().get_or_insert_with(Lane::default);
        let handle = lane.handle(self).await?;
        let written = match write(handle.queue.clone()).await {
            Ok(written) => written,
            Err(err) => {
                // Redis's own refusal included: a lane to a demoted primary (READONLY) must
                // ask the sentinels again, and a new connection costs little beside an error.
                if matches!(
                    err,
                    Error::Unreachable(_) | Error::Timeout(_) | Error::Redis(_)
                ) {
                    lane.drop_connection(handle.generation);
                }
                return Err(err);
            }
        };
        let stamp = lane.written.fetch_add(1, Ordering::AcqRel) + 1;
        let confirmation = lane.confirm(handle.generation, stamp, durability).await;
        Ok((written, confirmation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_tells_of_the_writes_it_covers_on_its_connection() {
        let one = Durability::replicas(1);
        let covered = Covered {
            generation: 3,
            through: 10,
            asked: Some(one),
            confirmed: 1,
        };
        assert_eq!(covered.verdict(3, 10, one), Some(Ok(())));
        assert_eq!(covered.verdict(3, 11, one), None, "a later write");
        assert_eq!(covered.verdict(2, 5, one), None, "another connection");
        assert_eq!(
            covered.verdict(3, 5, Durability::replicas(2)),
            None,
            "asked for fewer"
        );
        let short = Covered {
            confirmed: 0,
            ..covered
        };
        let verdict = short.verdict(3, 5, one).unwrap().unwrap_err();
        assert_eq!(verdict.confirmed, Some(0));
        assert_eq!(
            short.verdict(3, 5, one.within(Duration::from_secs(5))),
            None,
            "a longer wait may confirm more"
        );
        assert_eq!(Covered::default().verdict(0, 0, one), None);
    }
}
