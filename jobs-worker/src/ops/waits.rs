//! `jobsctl waits`: the queues' wait thresholds, listed with their current waits, set and
//! cleared.

use redjob::admin::{Admin, QueueStats};
use serde::Serialize;

use super::args::WaitsCommand;
use super::error::CliError;
use super::queues::secs_cell;
use super::render::{print, table};

/// Runs `jobsctl waits [set Q SECONDS | clear Q]`.
pub(super) async fn run(
    admin: &Admin,
    json: bool,
    command: Option<WaitsCommand>,
) -> Result<u8, CliError> {
    match command {
        None => list(admin, json).await,
        Some(WaitsCommand::Set { queue, seconds }) => set(admin, json, queue, seconds).await,
        Some(WaitsCommand::Clear { queue }) => clear(admin, json, queue).await,
    }
}

/// Lists every queue with a threshold: its current wait, and whether that is over.
async fn list(admin: &Admin, json: bool) -> Result<u8, CliError> {
    let watched = admin.watched_queues().await?;
    print(json, &watched, |watched: &Vec<QueueStats>| {
        if watched.is_empty() {
            return "No wait thresholds.\n".to_owned();
        }
        let rows = watched
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    secs_cell(s.wait_threshold_secs),
                    secs_cell(s.wait_secs),
                    s.ready.to_string(),
                    if s.paused { "yes" } else { "no" }.to_owned(),
                    if s.wait_exceeded { "LONG WAIT" } else { "OK" }.to_owned(),
                ]
            })
            .collect();
        table(
            &["QUEUE", "THRESHOLD", "WAIT", "READY", "PAUSED", "STATUS"],
            rows,
        )
    })?;
    Ok(0)
}

/// Sets a queue's threshold.
async fn set(admin: &Admin, json: bool, queue: String, seconds: u64) -> Result<u8, CliError> {
    let previous = admin.set_wait(&queue, seconds).await?;
    #[derive(Serialize)]
    struct Set {
        queue: String,
        threshold_secs: u64,
        previous_secs: Option<u64>,
    }
    let report = Set {
        queue,
        threshold_secs: seconds,
        previous_secs: previous,
    };
    print(json, &report, |r| {
        let was = r
            .previous_secs
            .map_or_else(|| "none".to_owned(), |secs| format!("{secs} s"));
        format!(
            "Queue {}: wait threshold set to {} s (was {was}).\n",
            r.queue, r.threshold_secs
        )
    })?;
    Ok(0)
}

/// Removes a queue's threshold.
async fn clear(admin: &Admin, json: bool, queue: String) -> Result<u8, CliError> {
    let cleared = admin.clear_wait(&queue).await?;
    #[derive(Serialize)]
    struct Cleared {
        queue: String,
        cleared: bool,
    }
    print(json, &Cleared { queue, cleared }, |c| {
        if c.cleared {
            format!("Queue {}: wait threshold removed.\n", c.queue)
        } else {
            format!("Queue {} had no wait threshold.\n", c.queue)
        }
    })?;
    Ok(0)
}
