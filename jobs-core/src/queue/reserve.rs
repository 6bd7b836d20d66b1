//! Where a job is reserved (`pop.lua`), its reservation extended while it runs, and deleted
//! once it is done.

use redis::{AsyncCommands, ScriptInvocation};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::queue::connection::Connection;
use crate::queue::due::seconds_arg;
use crate::queue::events::JobsEntry;
use crate::queue::group::GroupLimits;
use crate::queue::handle::RedisQueue;
use crate::queue::keys::QueueKeys;
use crate::queue::protocol::WorkerQueue;
use crate::queue::scripts;

/// What one pop returned.
#[derive(Debug, Clone, Default)]
pub struct Popped {
    /// The reserved copies, in queue order: the payloads with `attempts` raised by one.
    pub jobs: Vec<String>,
    /// Reserved payloads that are not UTF-8 text, byte for byte: no job can decode them, and
    /// they must be failed by these exact bytes.
    pub unreadable: Vec<Vec<u8>>,
    /// The group each of `jobs` was reserved from, in order (`None`: the queue's own list).
    pub groups: Vec<Option<String>>,
    /// The group each of `unreadable` was reserved from, in order.
    pub unreadable_groups: Vec<Option<String>>,
    /// Time until the next delayed job, reservation or blocked group falls due, by the
    /// server's clock.
    pub next_due: Option<Duration>,
}

/// What `pop.lua` answers: the reserved copies, the microseconds until the next one falls
/// due (-1: none), and each copy's group ('' for the queue's own).
type PopReply = (Vec<Vec<u8>>, i64, Vec<String>);

impl Popped {
    fn from_reply((popped, next_due_us, groups_of): PopReply) -> Self {
        let mut popped_groups = groups_of
            .into_iter()
            .map(|group| Some(group).filter(|group| !group.is_empty()));
        let mut out = Popped {
            next_due: u64::try_from(next_due_us).ok().map(Duration::from_micros),
            ..Popped::default()
        };
        for bytes in popped {
            let group = popped_groups.next().flatten();
            match String::from_utf8(bytes) {
                Ok(job) => {
                    out.jobs.push(job);
                    out.groups.push(group);
                }
                Err(err) => {
                    out.unreadable.push(err.into_bytes());
                    out.unreadable_groups.push(group);
                }
            }
        }
        out
    }
}

/// What a pop reserves: up to `count` jobs of `queue`, each reservation expiring
/// `retry_after` from then, after migrating at most `migrate_limit` due jobs of each kind; a
/// group with no limits of its own nor its queue's is held to `groups`.
#[derive(Debug, Clone, Copy)]
pub struct PopArgs<'a> {
    /// The queue to pop.
    pub queue: &'a QueueKeys,
    /// How long each reservation lasts.
    pub retry_after: Duration,
    /// The most jobs to reserve.
    pub count: usize,
    /// The most due jobs of each kind to migrate first.
    pub migrate_limit: usize,
    /// The limits of a group that has none of its own nor its queue's.
    pub groups: &'a GroupLimits,
}

/// What a wait, with a pop behind it or not ([`WorkerQueue::wait_then_pop`]), found.
#[derive(Debug)]
pub struct Woken {
    /// The token the wait took, with its notify list (`None`: the wait timed out).
    pub token: Option<(String, String)>,
    /// What the pop reserved (`None`: no pop went behind the wait, or the server lacked the
    /// pop's script, so it did not run).
    pub popped: Option<Popped>,
}

/// What a wait takes: a token of the notify lists `wait_on`, waiting at most `block_for` on
/// `conn`, with the pop `pop`, if any, pipelined behind it.
pub struct WaitArgs<'a> {
    /// A connection of its own (a blocked connection answers nothing else), to a single server
    /// when a pop goes behind the wait: a cluster may not serve both from one node.
    pub conn: &'a mut Connection,
    /// The notify lists to take a token of.
    pub wait_on: &'a [&'a str],
    /// How long to wait at most.
    pub block_for: Duration,
    /// The pop to run the moment the wait ends.
    pub pop: Option<PopArgs<'a>>,
}

/// Which finished jobs' reservations to delete: `reserved`, of `queue` (the keys of the queue,
/// or of one of its groups).
#[derive(Debug, Clone, Copy)]
pub struct DeleteArgs<'a> {
    /// The queue, or one of its groups, the jobs were reserved from.
    pub queue: &'a QueueKeys,
    /// The reserved copies.
    pub reserved: &'a [&'a str],
    /// The group each of `reserved` was reserved from, in order, when they are jobs of
    /// `queue`'s groups, of one group or several.
    pub groups: Option<&'a [&'a str]>,
    /// For jobs whose handlers completed, each one's uuid, name and attempt, in the order of
    /// `reserved`: their `completed` event (one entry for them all) is appended in the same
    /// transaction when the queue's events are on.
    pub completed: Option<&'a [(&'a str, &'a str, u32)]>,
}

impl<'a> DeleteArgs<'a> {
    /// Deletes `reserved`, of `queue`, and nothing else.
    pub fn new(queue: &'a QueueKeys, reserved: &'a [&'a str]) -> Self {
        Self {
            queue,
            reserved,
            groups: None,
            completed: None,
        }
    }
}

/// Which reservations to extend: `reserved`, of `queue`, to `retry_after` from now.
#[derive(Debug, Clone, Copy)]
pub struct ExtendArgs<'a> {
    /// The queue the jobs were reserved from.
    pub queue: &'a QueueKeys,
    /// The new expiry, from now.
    pub retry_after: Duration,
    /// The reserved copies.
    pub reserved: &'a [&'a str],
}

impl WorkerQueue<'_> {
    /// Makes the pop `pop`: reserves up to `pop.count` jobs of its queue, its own and its
    /// groups' in turn, after migrating due delayed jobs and expired reservations (at most
    /// `pop.migrate_limit` of each in this call). Each reservation expires `pop.retry_after`
    /// from now, by the server's clock.
    pub async fn pop(&self, pop: PopArgs<'_>) -> Result<Popped> {
        let call = self.pop_call(pop);
        Ok(Popped::from_reply(self.handle.invoke(&call).await?))
    }

    /// Waits on `wait.conn` for a token of the notify lists `wait.wait_on` (`BLPOP`, at most
    /// `wait.block_for`), then makes the pop `wait.pop`, if any, as [`WorkerQueue::pop`]
    /// does. Both go out in one pipeline: Redis runs the pop the moment the wait ends, without
    /// a round trip between them, whether a token came or the wait timed out.
    pub async fn wait_then_pop(&self, wait: WaitArgs<'_>) -> Result<Woken> {
        let WaitArgs {
            conn,
            wait_on,
            block_for,
            pop,
        } = wait;
        let mut wait = redis::cmd("BLPOP");
        wait.arg(wait_on).arg(block_for.as_secs_f64().max(0.01));
        let Some(pop) = pop else {
            let token = wait.query_async(conn).await.map_err(Error::from)?;
            return Ok(Woken {
                token,
                popped: None,
            });
        };
        let mut pipe = redis::pipe();
        pipe.add_command(wait).invoke_script(&self.pop_call(pop));
        // Each reply is read on its own: a server that lost its scripts answers the pop with
        // NOSCRIPT, and the worker then pops as usual, which loads the script.
        pipe.ignore_errors();
        let (token, popped): (redis::RedisResult<_>, redis::RedisResult<PopReply>) =
            pipe.query_async(conn).await.map_err(Error::from)?;
        let popped = match popped {
            Ok(reply) => Some(Popped::from_reply(reply)),
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                None
            }
            Err(err) => return Err(err.into()),
        };
        Ok(Woken {
            token: token?,
            popped,
        })
    }

    /// The `pop.lua` call that makes `pop`.
    fn pop_call(&self, pop: PopArgs<'_>) -> ScriptInvocation<'static> {
        let PopArgs {
            queue,
            retry_after,
            count,
            migrate_limit,
            groups,
        } = pop;
        let group_keys = queue.groups();
        let mut call = scripts::POP.key(&queue.ready);
        call.key(&queue.delayed)
            .key(&queue.reserved)
            .key(&queue.notify)
            .key(self.handle.keys().events(&queue.name))
            .key(&group_keys.rotation)
            .key(&group_keys.rotating)
            .key(&group_keys.blocked)
            .key(&group_keys.due)
            .key(&group_keys.limits)
            .key(&group_keys.own_turn)
            .arg(seconds_arg(retry_after))
            .arg(count.max(1))
            .arg(migrate_limit.max(1))
            .arg(self.handle.events_maxlen(&queue.name).unwrap_or(0))
            .arg(&group_keys.group_prefix)
            .arg(groups.concurrency.unwrap_or(0))
            .arg(groups.rate.map_or(String::new(), |rate| rate.to_string()));
        call
    }

    /// Deletes finished jobs' reservations, of one queue or of its groups, in one call, with
    /// their `completed` event when `delete.completed` names them; returns how many were
    /// still held.
    ///
    /// The event reports the attempts that completed, so it names each of them, held or not:
    /// an attempt whose reservation had expired (its worker stalled past retry_after) did
    /// complete, and its job, handed out again, reports its next attempt too. A transaction
    /// rather than a script: a script would be given every reserved copy again, which costs
    /// Redis more than the removal itself.
    pub async fn delete(&self, delete: DeleteArgs<'_>) -> Result<u64> {
        if !self.durable_acks() {
            return self.delete_now(delete).await;
        }
        let write =
            |lane: RedisQueue| async move { WorkerQueue::of(&lane).delete_now(delete).await };
        // Boxed: the durable path's future would weigh on every acknowledgement's.
        Box::pin(self.acknowledged(write)).await
    }

    async fn delete_now(&self, delete: DeleteArgs<'_>) -> Result<u64> {
        let DeleteArgs {
            queue,
            reserved,
            groups,
            completed,
        } = delete;
        if reserved.is_empty() {
            return Ok(0);
        }
        // Each job with its group: the group's set to remove it from, and its group to bring
        // back.
        let in_groups: Option<Vec<(&str, &str)>> = match (groups, &queue.group) {
            (Some(groups), _) => Some(
                groups
                    .iter()
                    .copied()
                    .zip(reserved.iter().copied())
                    .collect(),
            ),
            (None, Some(group)) => {
                Some(reserved.iter().map(|job| (group.as_str(), *job)).collect())
            }
            (None, None) => None,
        };
        if let Some(jobs) = in_groups {
            return self.delete_in_groups(queue, &jobs, completed).await;
        }
        let handle = self.handle;
        let (Some(completed), Some(maxlen)) = (completed, handle.events_maxlen(&queue.name)) else {
            return handle
                .call(|mut conn| async move { conn.zrem(&queue.reserved, reserved).await })
                .await;
        };
        let mut pipe = redis::pipe();
        pipe.atomic()
            .zrem(&queue.reserved, reserved)
            .add_command(JobsEntry::of(completed).xadd(
                &handle.keys().events(&queue.name),
                maxlen,
                "completed",
            ));
        pipe.ignore();
        let (held,): (u64,) = handle.query_pipe(&pipe).await?;
        Ok(held)
    }

    /// Pushes the expiry of reservations still held to `extend.retry_after` from now (server
    /// time); returns how many were still held. A live worker calls this for its running
    /// jobs, so a long job is never handed to a second worker.
    pub async fn extend(&self, extend: ExtendArgs<'_>) -> Result<u64> {
        let ExtendArgs {
            queue,
            retry_after,
            reserved,
        } = extend;
        if reserved.is_empty() {
            return Ok(0);
        }
        let mut call = scripts::EXTEND.key(&queue.reserved);
        call.arg(seconds_arg(retry_after));
        for member in reserved {
            call.arg(*member);
        }
        self.handle.invoke(&call).await
    }
}
