//! `jobsctl workers`, `recent` and `restart`: the live workers and what they did last.

use chrono::{DateTime, Utc};
use redjob::admin::{Admin, RecentFilter};
use serde::Serialize;

use super::error::CliError;
use super::render::{ago, first_line, more, print, table};

/// Lists the live workers.
pub(super) async fn workers(admin: &Admin, json: bool) -> Result<u8, CliError> {
    let workers = admin.workers().await?;
    print(json, &workers, |workers| {
        if workers.is_empty() {
            return "No live workers.\n".to_owned();
        }
        let now = Utc::now();
        let rows = workers
            .iter()
            .map(|w| {
                vec![
                    w.name.clone(),
                    w.host.clone(),
                    w.pid.to_string(),
                    w.queues.join(","),
                    format!("{}/{}", w.running, w.concurrency),
                    w.processed.to_string(),
                    w.failed.to_string(),
                    ago(now, w.started_at),
                    ago(now, w.last_heartbeat),
                ]
            })
            .collect();
        table(
            &[
                "NAME",
                "HOST",
                "PID",
                "QUEUES",
                "RUNNING",
                "PROCESSED",
                "FAILED",
                "STARTED",
                "HEARTBEAT",
            ],
            rows,
        )
    })?;
    Ok(0)
}

/// Shows the attempts workers finished last on a queue, newest first.
pub(super) async fn recent(
    admin: &Admin,
    json: bool,
    queue: &str,
    filter: &RecentFilter,
    after: Option<String>,
    limit: usize,
) -> Result<u8, CliError> {
    let page = admin
        .recent_page(queue, filter, after.as_deref(), limit)
        .await?;
    let recent = page.jobs;
    print(json, &recent, |jobs| {
        if jobs.is_empty() {
            return "No recent jobs.\n".to_owned();
        }
        let now = Utc::now();
        let rows = jobs
            .iter()
            .map(|j| {
                vec![
                    ago(now, j.finished_at),
                    j.outcome.as_str().to_uppercase(),
                    j.uuid.clone(),
                    j.job.clone(),
                    j.attempt.to_string(),
                    format!("{:.2} ms", j.runtime_us as f64 / 1000.0),
                    j.worker.clone(),
                    first_line(j.reason.as_deref().unwrap_or(""), 60),
                ]
            })
            .collect();
        table(
            &[
                "FINISHED", "OUTCOME", "UUID", "JOB", "ATTEMPT", "RUNTIME", "WORKER", "REASON",
            ],
            rows,
        )
    })?;
    more("recent jobs", page.next.as_deref());
    Ok(0)
}

/// Asks every worker to exit once its running jobs are done.
pub(super) async fn restart(admin: &Admin, json: bool) -> Result<u8, CliError> {
    let at = admin.restart().await?;
    #[derive(Serialize)]
    struct Restart {
        requested_at: DateTime<Utc>,
    }
    print(json, &Restart { requested_at: at }, |r| {
        format!(
            "Restart requested at {}: every worker exits once its running jobs are done.\n",
            r.requested_at.to_rfc3339()
        )
    })?;
    Ok(0)
}
