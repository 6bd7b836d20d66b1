//! Where a queue's groups are kept (docs/groups.md): a grouped job is pushed into its group's
//! sub-queue (`QueueKeys::for_group`) by the queue's own push scripts, and the group brought
//! into the rotation in the same pipeline (`group_touch.lua`); `pop.lua` serves the groups in
//! turn; a group's job that ends brings its group back from the blocked set
//! (`group_ended.lua` after the acker's removal, and the settle scripts' `group` effect). The
//! limits a group is held to are read by the pop from the queue's limits hash, or are the
//! worker's defaults ([`GroupLimits`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use redis::ScriptInvocation;

use crate::error::Result;
use crate::queue::effects::Effects;
use crate::queue::events::JobsEntry;
use crate::queue::handle::RedisQueue;
use crate::queue::keys::QueueKeys;
use crate::queue::protocol::WorkerQueue;
use crate::queue::scripts;

/// The limits of a group: at most `concurrency` of its jobs running at once, across every
/// worker, and at most `rate` started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupLimits {
    /// The most jobs of the group running at once (`None`: no limit).
    pub concurrency: Option<u32>,
    /// The most jobs of the group started within a period (`None`: no limit).
    pub rate: Option<GroupRate>,
}

impl GroupLimits {
    /// No limit.
    pub const NONE: GroupLimits = GroupLimits {
        concurrency: None,
        rate: None,
    };
}

/// At most `jobs` started within any `per`, spread evenly (GCRA: a burst of `jobs` at once,
/// then one each `per / jobs`). Written `<jobs>/<seconds>`.
///
/// ```
/// use redjob::queue::GroupRate;
/// use std::time::Duration;
/// let rate: GroupRate = "10/1".parse().unwrap();
/// assert_eq!(rate, GroupRate { jobs: 10, per: Duration::from_secs(1) });
/// assert_eq!(rate.to_string(), "10/1");
/// assert_eq!("3/0.5".parse::<GroupRate>().unwrap().per, Duration::from_millis(500));
/// assert!("10".parse::<GroupRate>().is_err());
/// assert!("0/1".parse::<GroupRate>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRate {
    /// The most jobs started within `per`.
    pub jobs: u32,
    /// The period.
    pub per: Duration,
}

impl fmt::Display for GroupRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.jobs, self.per.as_secs_f64())
    }
}

impl serde::Serialize for GroupRate {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for GroupRate {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A rate that is not `<jobs>/<seconds>` with at least one job and a period above zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid group rate {0:?}: expected <jobs>/<seconds>, such as 10/1")]
pub struct InvalidGroupRate(pub String);

impl FromStr for GroupRate {
    type Err = InvalidGroupRate;

    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        let invalid = || InvalidGroupRate(text.to_owned());
        let (jobs, secs) = text.split_once('/').ok_or_else(invalid)?;
        let jobs: u32 = jobs.trim().parse().map_err(|_| invalid())?;
        let secs: f64 = secs
            .trim()
            .trim_end_matches('s')
            .parse()
            .map_err(|_| invalid())?;
        if jobs == 0 || !(secs > 0.0 && secs.is_finite()) {
            return Err(invalid());
        }
        Ok(GroupRate {
            jobs,
            per: Duration::from_secs_f64(secs),
        })
    }
}

impl RedisQueue {
    /// The call that brings the groups of `queue` that jobs were just pushed into (or whose
    /// delayed jobs were) into the rotation, or into the due set (`group_touch.lua`). It
    /// follows the pushes in the same pipeline.
    pub(crate) fn group_touch(&self, queue: &str, groups: &[&str]) -> ScriptInvocation<'static> {
        let mut call = rotation_call(&scripts::GROUP_TOUCH, &self.queue_keys(queue));
        call.arg(groups);
        call
    }

    /// The call that pushes ready jobs (`delayed` false) or delayed ones into the group whose
    /// keys are `group` (`group_push.lua`); the caller adds the payloads, each delayed one
    /// after its due time.
    pub(crate) fn group_push(&self, group: &QueueKeys, delayed: bool) -> ScriptInvocation<'static> {
        let mut call = rotation_call(&scripts::GROUP_PUSH, group);
        call.key(match delayed {
            true => &group.delayed,
            false => &group.ready,
        })
        .arg(group.group.as_deref().unwrap_or_default())
        .arg(if delayed { "delayed" } else { "ready" });
        call
    }

    /// Brings the `groups` of `queue` whose jobs just ended back into the rotation, each that
    /// is blocked and not paused (`group_ended.lua`). Their jobs are acknowledged by then: a
    /// group this fails to bring back comes back by itself when its earliest reservation would
    /// expire, so a failure is logged, not returned.
    pub(crate) async fn bring_back(&self, queue: &QueueKeys, groups: &[&str]) {
        if groups.is_empty() {
            return;
        }
        let mut call = rotation_call(&scripts::GROUP_ENDED, queue);
        call.arg(groups);
        if let Err(err) = self.invoke::<()>(&call).await {
            tracing::warn!(
                queue = %queue.name,
                ?groups,
                error = %err,
                "could not bring groups back into the rotation; they come back when their earliest reservation would expire"
            );
        }
    }
}

impl Effects {
    /// A job of the group `group` ended: its group comes back into the rotation if it was
    /// blocked at its concurrency limit, and is scored in the due set when the job was
    /// `released` into its delayed set (`group` in `lib/groups.lua`). None for a job of the
    /// queue's own list.
    pub(crate) fn group(&mut self, group: &QueueKeys, released: bool) {
        let Some(name) = &group.group else {
            return;
        };
        let (keys, prefix) = group.rotation_keys();
        let released = String::from(if released { "1" } else { "" });
        self.add("group", keys, [prefix, name.clone(), released]);
    }
}

/// A call of `script` given, first, the rotation's keys of the queue of `queue` (its own keys
/// or a group's) and the groups' key prefix ([`QueueKeys::rotation_keys`]).
fn rotation_call(script: &'static redis::Script, queue: &QueueKeys) -> ScriptInvocation<'static> {
    let (keys, prefix) = queue.rotation_keys();
    let mut call = script.prepare_invoke();
    for key in keys {
        call.key(key);
    }
    call.arg(prefix);
    call
}

impl WorkerQueue<'_> {
    /// Deletes finished jobs' reservations in the groups of `queue` (the keys of the queue or
    /// of any of its groups), each given as its group and reserved copy; returns how many
    /// were still held. `completed`, for a queue whose events are on, names each job (uuid,
    /// name, attempt) for their `completed` event, appended in the same transaction.
    ///
    /// Each group of them that was blocked is then brought back into the rotation
    /// (`group_ended.lua`), so that a group at its concurrency limit runs its next job as
    /// soon as one ends. A transaction of `ZREM`s rather than one script: a script would be
    /// given every reserved copy again, which costs Redis more than the removal itself. The
    /// groups' return is a second step, taken only for groups that were blocked: it changes
    /// only when a group is looked at again, and a group whose return is missed (its worker
    /// killed in between) is looked at again when its earliest reservation would expire.
    pub(crate) async fn delete_in_groups(
        &self,
        queue: &QueueKeys,
        jobs: &[(&str, &str)],
        completed: Option<&[(&str, &str, u32)]>,
    ) -> Result<u64> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let handle = self.handle;
        let mut by_group: Vec<(&str, Vec<&str>)> = Vec::new();
        for (group, reserved) in jobs {
            match by_group.iter_mut().find(|(name, _)| name == group) {
                Some((_, copies)) => copies.push(reserved),
                None => by_group.push((group, vec![reserved])),
            }
        }
        let keys = queue.groups();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (group, copies) in &by_group {
            pipe.zrem(queue.for_group(group).reserved, copies);
        }
        if let (Some(completed), Some(maxlen)) = (completed, handle.events_maxlen(&queue.name)) {
            let events = handle.keys().events(&queue.name);
            pipe.add_command(JobsEntry::of(completed).xadd(&events, maxlen, "completed"))
                .ignore();
        }
        pipe.cmd("ZMSCORE")
            .arg(&keys.blocked)
            .arg(by_group.iter().map(|(group, _)| *group).collect::<Vec<_>>());
        let mut replies: Vec<redis::Value> = handle.query_pipe(&pipe).await?;
        let blocked: Vec<Option<f64>> =
            redis::from_redis_value(replies.pop().unwrap_or(redis::Value::Nil))
                .map_err(redis::RedisError::from)?;
        let removed: Vec<u64> = redis::from_redis_value(redis::Value::Array(replies))
            .map_err(redis::RedisError::from)?;
        let ended: Vec<&str> = by_group
            .iter()
            .zip(removed.iter().zip(&blocked))
            .filter(|(_, (held, blocked))| **held > 0 && blocked.is_some_and(f64::is_finite))
            .map(|((group, _), _)| *group)
            .collect();
        handle.bring_back(queue, &ended).await;
        Ok(removed.iter().sum())
    }
}
