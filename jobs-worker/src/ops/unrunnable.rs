//! `jobsctl unrunnable`: the job types some worker met and could not run lately (a type it
//! does not link, data it cannot decode), since when, and how many live workers link them.
//! During a rolling deploy they wait for the new workers; one that no live worker links is a
//! deploy gone wrong, and its jobs fail once `--unknown-job-grace` has passed.

use chrono::Utc;
use redjob::admin::{Admin, UnrunnableJobs};

use super::error::CliError;
use super::render::{ago, first_line, print, table};

/// Runs `jobsctl unrunnable`.
pub(super) async fn run(admin: &Admin, json: bool) -> Result<u8, CliError> {
    let listed = admin.unrunnable().await?;
    let now = Utc::now();
    print(json, &listed, |listed: &Vec<UnrunnableJobs>| {
        if listed.is_empty() {
            return "Every job met lately had a worker that can run it.\n".to_owned();
        }
        let rows = listed
            .iter()
            .map(|jobs| {
                vec![
                    jobs.job.clone(),
                    jobs.queue.clone(),
                    ago(now, jobs.since),
                    ago(now, jobs.last_seen),
                    match jobs.runnable_by {
                        0 => "NONE".to_owned(),
                        workers => workers.to_string(),
                    },
                    first_line(&jobs.reason, 80),
                ]
            })
            .collect();
        table(
            &[
                "JOB",
                "QUEUE",
                "SINCE",
                "LAST MET",
                "WORKERS THAT RUN IT",
                "WHY",
            ],
            rows,
        )
    })?;
    Ok(0)
}
