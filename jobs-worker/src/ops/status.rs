//! `jobsctl status`, `cancel` and `events`: watching and stopping jobs.

use chrono::Utc;
use futures_util::StreamExt;
use redjob::admin::{Admin, AdminError};
use redjob::status::{Cancelled, JobState, JobStatus, QueueEvent};
use serde::Serialize;
use std::io::Write;
use uuid::Uuid;

use super::error::CliError;
use super::render::{ago, print, table};

/// A job's status, with the checkpoint of a resumable one.
#[derive(Debug, Serialize)]
pub(crate) struct StatusWithCheckpoint {
    #[serde(flatten)]
    status: JobStatus,
    /// The last checkpoint a resumable job saved, while it has not settled.
    checkpoint: Option<serde_json::Value>,
}

/// The status of the job `uuid`, and its checkpoint when its queue is known: from its status
/// record, else from the live worker running it (an untracked job), which says whether it has
/// one.
pub(crate) async fn with_checkpoint(
    admin: &Admin,
    uuid: Uuid,
) -> Result<StatusWithCheckpoint, AdminError> {
    let status = admin.queue().status(uuid).await?;
    let queue = match &status.queue {
        Some(queue) => Some(queue.clone()),
        None => {
            let text = uuid.to_string();
            let workers = admin.workers().await?;
            let mut running = workers.into_iter().flat_map(|worker| worker.jobs);
            running
                .find(|job| job.uuid == text && job.checkpointed)
                .map(|job| job.queue)
        }
    };
    let checkpoint = match &queue {
        Some(queue) => admin.queue().checkpoint(queue, uuid).await?,
        None => None,
    };
    Ok(StatusWithCheckpoint {
        status,
        checkpoint: checkpoint.map(checkpoint_value),
    })
}

/// A checkpoint as the tools show it: its JSON, or its text should it not parse.
pub(crate) fn checkpoint_value(json: String) -> serde_json::Value {
    serde_json::from_str(&json).unwrap_or(serde_json::Value::String(json))
}

/// Shows a job's status. Exit status 1 when nothing is known of it: no status record, and no
/// checkpoint.
pub(super) async fn status(admin: &Admin, json: bool, uuid: Uuid) -> Result<u8, CliError> {
    let found = with_checkpoint(admin, uuid).await?;
    print(json, &found, status_text)?;
    Ok(u8::from(
        found.status.state == JobState::Unknown && found.checkpoint.is_none(),
    ))
}

fn status_text(found: &StatusWithCheckpoint) -> String {
    let status = &found.status;
    let text = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".to_owned());
    let json = |value: &Option<serde_json::Value>| {
        value
            .as_ref()
            .map_or_else(|| "-".to_owned(), |v| v.to_string())
    };
    let updated = status
        .updated_at
        .map_or_else(|| "-".to_owned(), |at| ago(Utc::now(), at));
    let rows = vec![
        vec!["uuid".to_owned(), status.uuid.to_string()],
        vec!["state".to_owned(), status.state.to_string()],
        vec!["job".to_owned(), text(&status.job)],
        vec!["queue".to_owned(), text(&status.queue)],
        vec!["attempt".to_owned(), status.attempt.to_string()],
        vec!["worker".to_owned(), text(&status.worker)],
        vec!["progress".to_owned(), json(&status.progress)],
        vec!["result".to_owned(), json(&status.result)],
        vec!["error".to_owned(), text(&status.error)],
        vec!["checkpoint".to_owned(), json(&found.checkpoint)],
        vec!["updated".to_owned(), updated],
    ];
    table(&["field", "value"], rows)
}

/// Asks a job to stop, and says what the request found.
pub(super) async fn cancel(admin: &Admin, json: bool, uuid: Uuid) -> Result<u8, CliError> {
    let found = admin.queue().cancel(uuid).await.map_err(AdminError::from)?;
    #[derive(Serialize)]
    struct Cancel {
        uuid: Uuid,
        /// `waiting`, `running`, `finished` or `unknown`.
        found: &'static str,
        /// The job's state, when known.
        state: Option<JobState>,
        /// Whether the request stands (nothing changes for a finished job).
        requested: bool,
    }
    let report = Cancel {
        uuid,
        found: found.found(),
        state: found.state(),
        requested: found.requested(),
    };
    print(json, &report, |_| {
        match found {
        Cancelled::Waiting(state) => format!(
            "Job {uuid} is {state}: it is settled as cancelled, without running, when a worker reaches it.\n"
        ),
        Cancelled::Running => format!(
            "Job {uuid} is running: its handler is told now, and stopped after the worker's cancel grace if it goes on.\n"
        ),
        Cancelled::Finished(state) => {
            format!("Job {uuid} has already finished ({state}); nothing changed.\n")
        }
        Cancelled::Unknown => format!(
            "Nothing is known of job {uuid} (it is not tracked, or its record expired): if it waits or runs anywhere, it is cancelled when a worker sees the request.\n"
        ),
    }
    })?;
    Ok(0)
}

/// Turns a queue's events on or off (`switch`), or tails them: one line each (or one JSON
/// object per line), until `count` were shown or the command is interrupted.
pub(super) async fn events(
    admin: &Admin,
    json: bool,
    queue: &str,
    switch: Option<Option<u64>>,
    count: Option<usize>,
    after: Option<String>,
) -> Result<u8, CliError> {
    let handle = admin.queue();
    if let Some(maxlen) = switch {
        handle
            .set_events(queue, maxlen)
            .await
            .map_err(AdminError::from)?;
        #[derive(Serialize)]
        struct Switched<'a> {
            queue: &'a str,
            events: bool,
            max: Option<u64>,
        }
        let switched = Switched {
            queue,
            events: maxlen.is_some(),
            max: maxlen,
        };
        return print(json, &switched, |s| match s.max {
            Some(max) => format!("Events of queue {} are on, about {max} kept.\n", s.queue),
            None => format!("Events of queue {} are off.\n", s.queue),
        })
        .map(|_| 0);
    }
    let on = handle.events_on().await.map_err(AdminError::from)?;
    if !on.contains_key(queue) {
        eprintln!(
            "Events of queue {queue} are off: turn them on with `jobsctl events {queue} --on`."
        );
    }
    let stream = match after {
        Some(id) => handle.events_after(queue, &id).boxed(),
        None => handle
            .events(queue)
            .await
            .map_err(AdminError::from)?
            .boxed(),
    };
    let mut stream = stream.take(count.unwrap_or(usize::MAX));
    while let Some(event) = stream.next().await {
        let line = match json {
            true => serde_json::to_string(&event).expect("an event serializes"),
            false => event_line(&event),
        };
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")?;
        stdout.flush()?;
    }
    Ok(0)
}

fn event_line(event: &QueueEvent) -> String {
    let data = event
        .data
        .as_ref()
        .map_or_else(String::new, |data| format!("  {data}"));
    format!(
        "{}  {:<9}  {}  {}  attempt {}{data}",
        event.id, event.event, event.uuid, event.job, event.attempt
    )
}
