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

/// What a wait, with a pop behind it or not (`WorkerQueue::wait_then_pop`), found.
#[derive(Debug)]
pub struct Woken {
    /// The token the wait took, with its notify list (`None`: the wait timed out).
    pub token: Option<(String, String)>,
    /// What the pop reserved (`None`: no pop went behind the wait, or the server lacked the
    /// pop's script, so it did not run).
    pub popped: Option<Popped>,
}

impl RedisQueue {
    /// Makes the pop `pop`: reserves up to `pop.count` jobs of its queue, its own and its
    /// groups' in turn, after migrating due delayed jobs and expired reservations (at most
    /// `pop.migrate_limit` of each in this call). Each reservation expires `pop.retry_after`
    /// from now, by the server's clock.
    pub(crate) async fn pop(&self, pop: PopArgs<'_>) -> Result<Popped> {
        Ok(Popped::from_reply(self.invoke(&self.pop_call(pop)).await?))
    }

    /// Waits on `conn` for a token of the notify lists `wait_on` (`BLPOP`, at most
    /// `block_for`), then makes the pop `pop`, if any, as [`RedisQueue::pop`] does. Both go
    /// out in one pipeline: Redis runs the pop the moment the wait ends, without a round trip
    /// between them, whether a token came or the wait timed out.
    ///
    /// `conn` must be a connection of its own (a blocked connection answers nothing else),
    /// to a single server when a pop goes behind the wait: a cluster may not serve both from
    /// one node.
    pub(crate) async fn wait_then_pop(
        &self,
        conn: &mut Connection,
        wait_on: &[&str],
        block_for: Duration,
        pop: Option<PopArgs<'_>>,
    ) -> Result<Woken> {
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
            .key(self.keys().events(&queue.name))
            .key(&group_keys.rotation)
            .key(&group_keys.rotating)
            .key(&group_keys.blocked)
            .key(&group_keys.due)
            .key(&group_keys.limits)
            .key(&group_keys.own_turn)
            .arg(seconds_arg(retry_after))
            .arg(count.max(1))
            .arg(migrate_limit.max(1))
            .arg(self.events_maxlen(&queue.name).unwrap_or(0))
            .arg(&group_keys.group_prefix)
            .arg(groups.concurrency.unwrap_or(0))
            .arg(groups.rate.map_or(String::new(), |rate| rate.to_string()));
        call
    }

    /// Deletes finished jobs' reservations of one queue, or of one group of it, in one call;
    /// returns how many were still held.
    pub(crate) async fn delete_many(&self, queue: &QueueKeys, reserved: &[&str]) -> Result<u64> {
        if reserved.is_empty() {
            return Ok(0);
        }
        if let Some(group) = &queue.group {
            return self
                .delete_in_groups(queue, &in_group(group, reserved), None)
                .await;
        }
        self.call(|mut conn| async move { conn.zrem(&queue.reserved, reserved).await })
            .await
    }

    /// Deletes the reservations of jobs whose handlers completed, of one queue whose events
    /// are on, and appends their `completed` event (one entry for them all) in the same
    /// transaction; returns how many reservations were still held. `completed` gives each
    /// job's uuid, name and attempt, in the order of `reserved`.
    ///
    /// The event reports the attempts that completed, so it names each of them, held or not:
    /// an attempt whose reservation had expired (its worker stalled past retry_after) did
    /// complete, and its job, handed out again, reports its next attempt too. A transaction
    /// rather than a script: a script would be given every reserved copy again, which costs
    /// Redis more than the removal itself.
    pub async fn delete_completed(
        &self,
        queue: &QueueKeys,
        reserved: &[&str],
        completed: &[(&str, &str, u32)],
    ) -> Result<u64> {
        if reserved.is_empty() {
            return Ok(0);
        }
        if let Some(group) = &queue.group {
            return self
                .delete_in_groups(queue, &in_group(group, reserved), Some(completed))
                .await;
        }
        let Some(maxlen) = self.events_maxlen(&queue.name) else {
            return self.delete_many(queue, reserved).await;
        };
        let mut pipe = redis::pipe();
        pipe.atomic()
            .zrem(&queue.reserved, reserved)
            .add_command(JobsEntry::of(completed).xadd(
                &self.keys().events(&queue.name),
                maxlen,
                "completed",
            ));
        pipe.ignore();
        let (held,): (u64,) = self.query_pipe(&pipe).await?;
        Ok(held)
    }

    /// Pushes the expiry of reservations still held to `retry_after` from now (server time);
    /// returns how many were still held. A live worker calls this for its running jobs, so a
    /// long job is never handed to a second worker.
    pub(crate) async fn extend(
        &self,
        queue: &QueueKeys,
        retry_after: Duration,
        reserved: &[&str],
    ) -> Result<u64> {
        if reserved.is_empty() {
            return Ok(0);
        }
        let mut call = scripts::EXTEND.key(&queue.reserved);
        call.arg(seconds_arg(retry_after));
        for member in reserved {
            call.arg(*member);
        }
        self.invoke(&call).await
    }
}

/// Reserved copies of one group's jobs, each with its group, as
/// [`RedisQueue::delete_in_groups`] takes them.
fn in_group<'a>(group: &'a str, reserved: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    reserved.iter().map(|job| (group, *job)).collect()
}
