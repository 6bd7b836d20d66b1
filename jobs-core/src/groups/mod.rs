//! Fair queues: the jobs of one queue in groups (a tenant each, say), served in turn, each
//! group within limits of its own.
//!
//! A job goes to a group by its dispatch ([`PendingDispatch::group`]) or its type
//! ([`Job::group`]). Each group is a sub-queue shaped like the queue
//! ([`QueueKeys::for_group`]): its own ready list, delayed set and reserved set. The groups
//! with jobs that may run take turns: a worker's pop serves one job of a group, moves the group
//! to the back of the rotation, and goes on with the next, so a group's backlog holds another
//! group's job back by at most one job of each group in turn. The queue's own list, which
//! Laravel's workers read and which holds every job without a group, takes one turn in the
//! rotation like a group.
//!
//! A group is held to limits, each checked as the pop serves it:
//! - **concurrency**: at most N of its jobs running at once, across every worker and host.
//!   Its running jobs are its reservations, so a killed worker's slots are freed when they
//!   expire, after retry_after, as its jobs come back;
//! - **rate**: at most N jobs started within a period, spread evenly ([`GroupRate`]);
//! - **paused**: none started until it is resumed.
//!
//! A group may be given a **weight** ([`Groups::set_weight`]): a group of weight 3 has three
//! jobs in each of its turns where the others have one (three shares of a pop where each has a
//! share), and keeps its place across pops until it has had them, so the proportion holds
//! however few jobs a worker takes at once.
//!
//! A group at a limit leaves the rotation until a slot frees (one of its jobs ends), its rate
//! allows the next job, or it is resumed, so a pop never scans past groups that cannot run.
//! Limits are set per group or for every group of a queue with [`Groups::set_limits`]
//! (`jobsctl groups QUEUE --limit`), or given to the workers as defaults
//! (`--group-concurrency`, `--group-rate`).
//!
//! Delayed jobs, releases and retries of a grouped job go back to its group; unique jobs are
//! unique across the queue's groups. A chain's links, a batch's jobs and their callbacks may
//! each be in a group: each is pushed into it when its turn in the workflow comes.
//! Laravel's workers never see a grouped job. docs/groups.md is the guide.
//!
//! ```no_run
//! # use redjob::{job, Job, JobContext, JobResult, RedisQueue};
//! # use redjob::queue::GroupLimits;
//! # use std::num::NonZeroU32;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct ImportRow { tenant: u64, row: u64 }
//! # #[job(queue = "imports")] impl Job for ImportRow {
//! #     fn group(&self) -> Option<String> { Some(format!("tenant-{}", self.tenant)) }
//! #     async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
//! # async fn demo(queue: RedisQueue) -> Result<(), redjob::Error> {
//! ImportRow { tenant: 42, row: 1 }.dispatch().await?; // in group tenant-42 (Job::group)
//! let groups = queue.groups("imports");
//! let two_at_once = GroupLimits { concurrency: Some(2), rate: None };
//! groups.set_limits(Some("tenant-42"), two_at_once).await?;
//! groups.pause("tenant-7").await?;
//! groups.set_weight("tenant-1", NonZeroU32::new(3).unwrap()).await?;
//! for group in groups.list().await?.groups {
//!     println!("{} ready {} running {}", group.name, group.ready, group.running);
//! }
//! # Ok(()) }
//! ```
//!
//! [`PendingDispatch::group`]: crate::PendingDispatch::group
//! [`Job::group`]: crate::Job::group
//! [`QueueKeys::for_group`]: crate::queue::keys::QueueKeys::for_group
//! [`GroupRate`]: crate::queue::GroupRate
//!
//! Reading a queue's groups for operators (its sizes, [`Groups::list`], `jobsctl groups`, the
//! dashboard, the gauges) looks at [`GROUPS_READ`] groups at most, in one short script call;
//! a queue with more says its figures are partial.

use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;

use crate::error::Result;
use crate::queue::keys::{check_group_name, check_queue_name, QueueKeys};
use crate::queue::scripts;
use crate::queue::{GroupLimits, GroupRate, RedisQueue, GROUPS_READ};

/// The groups of one queue, for operators: see [`RedisQueue::groups`].
#[derive(Debug, Clone)]
pub struct Groups {
    queue: RedisQueue,
    keys: QueueKeys,
}

/// One group of a queue, as [`Groups::list`] reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// Its ready jobs.
    pub ready: u64,
    /// Its delayed and released jobs.
    pub delayed: u64,
    /// Its reserved jobs: those running.
    pub running: u64,
    /// Its own limits (the queue's, or the workers' defaults, apply where it has none).
    pub limits: GroupLimits,
    /// Whether it is paused.
    pub paused: bool,
    /// Its weight: the jobs it has in each of its turns where a group of weight 1 has one
    /// ([`Groups::set_weight`]).
    pub weight: u32,
    /// Where the group is in its queue's rotation.
    pub state: GroupState,
    /// For a group blocked at a limit, when it is looked at again: a Unix time in seconds, by
    /// Redis's clock (a job of it that ends brings it back sooner). `None` otherwise, and for a
    /// paused group, which waits until it is resumed.
    pub blocked_until: Option<f64>,
}

/// A queue's groups, as [`Groups::list`] reads them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupList {
    /// The groups with jobs, the most ready jobs first.
    pub groups: Vec<GroupInfo>,
    /// Whether the queue has more groups than one read looks at ([`GROUPS_READ`]): then
    /// `groups` are among those it looked at.
    pub partial: bool,
}

/// Where a group is in its queue's rotation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupState {
    /// It takes turns: it has ready jobs and may run one.
    Rotating,
    /// It has ready jobs but may not run one yet: at a limit, or paused.
    Blocked,
    /// It has no ready job: only delayed or running ones.
    Idle,
}

impl RedisQueue {
    /// The groups of `queue` ([`crate::groups`]), to list them and set their limits.
    pub fn groups(&self, queue: &str) -> Groups {
        Groups {
            queue: self.clone(),
            keys: self.queue_keys(queue),
        }
    }
}

impl Groups {
    /// The queue's groups that have jobs, the ones with the most ready jobs first (then by
    /// name), read in one step from at most [`GROUPS_READ`] groups: those taking turns first,
    /// then those at a limit, then those with only delayed or running jobs.
    pub async fn list(&self) -> Result<GroupList> {
        let keys = self.keys.groups();
        let mut call = scripts::GROUP_SIZES.key(&keys.rotation);
        call.key(&keys.rotating)
            .key(&keys.blocked)
            .key(&keys.due)
            .key(&keys.limits)
            .arg(&keys.group_prefix)
            .arg(GROUPS_READ);
        type Entry = (
            String,
            u64,
            u64,
            u64,
            String,
            String,
            u8,
            String,
            u8,
            String,
        );
        let (entries, partial): (Vec<Entry>, u8) = self.queue.invoke(&call).await?;
        let mut groups: Vec<GroupInfo> = entries
            .into_iter()
            .map(
                |(
                    name,
                    ready,
                    delayed,
                    running,
                    concurrency,
                    rate,
                    paused,
                    blocked,
                    rotating,
                    weight,
                )| {
                    let state = match (rotating, blocked.as_str()) {
                        (1, _) => GroupState::Rotating,
                        (_, "") => GroupState::Idle,
                        (_, _) => GroupState::Blocked,
                    };
                    let blocked_until = blocked.parse().ok().filter(|at: &f64| at.is_finite());
                    GroupInfo {
                        name,
                        ready,
                        delayed,
                        running,
                        limits: GroupLimits {
                            concurrency: concurrency.parse().ok(),
                            rate: rate.parse().ok(),
                        },
                        paused: paused == 1,
                        weight: weight.parse().unwrap_or(1),
                        state,
                        blocked_until,
                    }
                },
            )
            .collect();
        groups.sort_by(|a, b| b.ready.cmp(&a.ready).then_with(|| a.name.cmp(&b.name)));
        Ok(GroupList {
            groups,
            partial: partial == 1,
        })
    }

    /// Sets the limits of `group`, or of every group of the queue (`None`), replacing those
    /// it had (a limit `None` is cleared). A group's own limits win over its queue's, and
    /// those over the workers' defaults. A blocked group is held to the new limits at once.
    pub async fn set_limits(&self, group: Option<&str>, limits: GroupLimits) -> Result<()> {
        let concurrency = limits.concurrency.map_or(String::new(), |n| n.to_string());
        let rate = limits
            .rate
            .map_or(String::new(), |rate: GroupRate| rate.to_string());
        self.change(group, &[("c", &concurrency), ("r", &rate)])
            .await
    }

    /// Pauses `group`: none of its jobs starts until it is resumed (those running go on).
    pub async fn pause(&self, group: &str) -> Result<()> {
        self.change(Some(group), &[("p", "1")]).await
    }

    /// Resumes a paused `group`.
    pub async fn resume(&self, group: &str) -> Result<()> {
        self.change(Some(group), &[("p", "")]).await
    }

    /// Gives `group` a weight: where the groups take one job each in turn, it takes `weight`
    /// in its turn; where they share a pop, it has `weight` shares. It keeps its place at the
    /// head of the rotation across pops until it has had its turn, so the proportion holds for
    /// a worker that takes one job at a time. A weight of 1, every group's at first, clears it.
    /// A weight does not raise the group's limits: it takes its turn within them.
    pub async fn set_weight(&self, group: &str, weight: NonZeroU32) -> Result<()> {
        let weight = match weight.get() {
            1 => String::new(),
            n => n.to_string(),
        };
        self.change(Some(group), &[("w", &weight)]).await
    }

    async fn change(&self, group: Option<&str>, limits: &[(&str, &str)]) -> Result<()> {
        check_queue_name(&self.keys.name)?;
        if let Some(group) = group {
            check_group_name(group)?;
        }
        let keys = self.keys.groups();
        let mut call = scripts::GROUP_LIMITS.key(&keys.rotation);
        call.key(&keys.rotating)
            .key(&keys.blocked)
            .key(&keys.due)
            .key(&keys.limits)
            .key(&self.keys.notify)
            .arg(&keys.group_prefix)
            .arg(group.unwrap_or("*"));
        for (limit, value) in limits {
            call.arg(*limit).arg(*value);
        }
        self.queue.invoke::<u64>(&call).await?;
        Ok(())
    }
}
