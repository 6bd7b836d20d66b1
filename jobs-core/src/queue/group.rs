//! Where a queue's groups are kept (docs/groups.md): a grouped job is pushed into its group's
//! sub-queue (`QueueKeys::for_group`) by the queue's own push scripts, and the group brought
//! into the rotation in the same pipeline (`group_touch.lua`); `pop.lua` serves the groups in
//! turn; a group's job that ends brings its group back from the blocked set
//! (`group_ack.lua`, and the settle scripts' `group` effect). The limits a group is held to
//! are read by the pop from the queue's limits hash, or are the worker's defaults
//! ([`GroupLimits`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use redis::ScriptInvocation;

use crate::error::Result;
use crate::queue::effects::Effects;
use crate::queue::events::JobsEntry;
use crate::queue::handle::RedisQueue;
use crate::queue::keys::QueueKeys;
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
        let queue = self.queue_keys(queue);
        let keys = queue.groups();
        let mut call = scripts::GROUP_TOUCH.key(&keys.rotation);
        call.key(&keys.rotating)
            .key(&keys.blocked)
            .key(&keys.due)
            .key(&queue.notify)
            .arg(&keys.group_prefix);
        for group in groups {
            call.arg(*group);
        }
        call
    }

    /// Deletes finished jobs' reservations in the groups of `queue` (the keys of the queue or
    /// of any of its groups), each given as its group and reserved copy, and brings each of
    /// those groups that was blocked back into the rotation (`group_ack.lua`); returns how
    /// many were still held. `completed`, for a queue whose events are on, names each job
    /// (uuid, name, attempt) for their `completed` event, appended in the same step.
    pub(crate) async fn delete_in_groups(
        &self,
        queue: &QueueKeys,
        jobs: &[(&str, &str)],
        completed: Option<&[(&str, &str, u32)]>,
    ) -> Result<u64> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let keys = queue.groups();
        let mut call = scripts::GROUP_ACK.key(&keys.rotation);
        call.key(&keys.rotating)
            .key(&keys.blocked)
            .key(&keys.due)
            .key(&queue.notify)
            .key(self.keys().events(&queue.name))
            .arg(&keys.group_prefix);
        match (completed, self.events_maxlen(&queue.name)) {
            (Some(completed), Some(maxlen)) => {
                let entry = JobsEntry::of(completed);
                call.arg(maxlen)
                    .arg(entry.uuids)
                    .arg(entry.names)
                    .arg(entry.attempts);
            }
            _ => {
                call.arg(0).arg("").arg("").arg("");
            }
        }
        for (group, reserved) in jobs {
            call.arg(*group).arg(*reserved);
        }
        self.invoke(&call).await
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
        let keys = group.groups();
        self.add(
            "group",
            [
                keys.rotation,
                keys.rotating,
                keys.blocked,
                keys.due,
                group.notify.clone(),
            ],
            [
                keys.group_prefix,
                name.clone(),
                String::from(if released { "1" } else { "" }),
            ],
        );
    }
}
