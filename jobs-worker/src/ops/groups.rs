//! `jobsctl groups`: a queue's groups, the busiest first, and pausing, resuming, limiting and
//! weighing them.

use redjob::admin::{Admin, AdminError};
use redjob::groups::{GroupInfo, GroupState};
use redjob::queue::GroupLimits;
use serde::Serialize;
use std::num::NonZeroU32;

use super::error::CliError;
use super::render::{print, table};

/// What `jobsctl groups` changes before it lists.
pub(super) enum Change {
    /// `--pause GROUP`.
    Pause(String),
    /// `--resume GROUP`.
    Resume(String),
    /// `--set GROUP` (`*`: every group of the queue) with its limits.
    Limits(String, GroupLimits),
    /// `--weight GROUP WEIGHT`.
    Weight(String, NonZeroU32),
}

impl Change {
    /// `--weight GROUP WEIGHT`, from its two values.
    pub(super) fn weight(values: &[String]) -> Result<Change, CliError> {
        match values {
            [group, weight] => weight
                .parse()
                .map(|weight| Change::Weight(group.clone(), weight))
                .map_err(|_| {
                    CliError::Invalid(format!(
                        "--weight {group} {weight}: a weight is a whole number of at least 1"
                    ))
                }),
            _ => Err(CliError::Invalid("--weight takes GROUP WEIGHT".to_owned())),
        }
    }
}

/// Applies `change`, if any, then lists the queue's groups, at most `limit` of them.
pub(super) async fn run(
    admin: &Admin,
    json: bool,
    queue: &str,
    limit: usize,
    change: Option<Change>,
) -> Result<u8, CliError> {
    let groups = admin.queue().groups(queue);
    match change {
        Some(Change::Pause(group)) => groups.pause(&group).await.map_err(AdminError::from)?,
        Some(Change::Resume(group)) => groups.resume(&group).await.map_err(AdminError::from)?,
        Some(Change::Limits(group, limits)) => {
            let group = (group != "*").then_some(group.as_str());
            groups
                .set_limits(group, limits)
                .await
                .map_err(AdminError::from)?
        }
        Some(Change::Weight(group, weight)) => groups
            .set_weight(&group, weight)
            .await
            .map_err(AdminError::from)?,
        None => {}
    }
    let listed = groups.list().await.map_err(AdminError::from)?;
    let mut busiest = listed.groups;
    let total = busiest.len();
    busiest.truncate(limit);
    let listing = Listing {
        queue: queue.to_owned(),
        groups: total,
        partial: listed.partial,
        busiest,
    };
    print(json, &listing, groups_text)?;
    Ok(0)
}

/// What `jobsctl groups` shows.
#[derive(Serialize)]
struct Listing {
    queue: String,
    /// How many groups have jobs (the listing shows the busiest of them).
    groups: usize,
    /// Whether the queue has more groups than one read looks at: then `groups` counts
    /// those it looked at.
    partial: bool,
    busiest: Vec<GroupInfo>,
}

fn groups_text(listing: &Listing) -> String {
    if listing.busiest.is_empty() {
        return format!("Queue {} has no groups with jobs.\n", listing.queue);
    }
    let rows = listing
        .busiest
        .iter()
        .map(|group| {
            let limits = &group.limits;
            vec![
                group.name.clone(),
                group.ready.to_string(),
                group.delayed.to_string(),
                group.running.to_string(),
                limits
                    .concurrency
                    .map_or_else(|| "-".to_owned(), |n| n.to_string()),
                limits
                    .rate
                    .map_or_else(|| "-".to_owned(), |r| r.to_string()),
                group.weight.to_string(),
                state_text(group),
            ]
        })
        .collect();
    let mut text = table(
        &[
            "group",
            "ready",
            "delayed",
            "running",
            "concurrency",
            "rate",
            "weight",
            "state",
        ],
        rows,
    );
    if listing.groups > listing.busiest.len() {
        text.push_str(&format!(
            "({} of {} groups with jobs; --limit shows more)\n",
            listing.busiest.len(),
            listing.groups
        ));
    }
    if listing.partial {
        text.push_str(&format!(
            "(the queue has more groups than one read looks at, {}: these are among them)\n",
            redjob::queue::GROUPS_READ
        ));
    }
    text
}

fn state_text(group: &GroupInfo) -> String {
    match group.state {
        _ if group.paused => "paused".to_owned(),
        GroupState::Rotating => "taking turns".to_owned(),
        GroupState::Blocked => "at a limit".to_owned(),
        GroupState::Idle => "idle".to_owned(),
    }
}
