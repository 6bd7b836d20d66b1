//! `jobsctl schedule`: the schedules workers keep.

use chrono::Utc;
use redjob::admin::{Admin, ScheduleInfo};
use serde::Serialize;
use std::time::Duration;

use super::args::ScheduleCommand;
use super::error::CliError;
use super::render::{ago, print, relative, table};

/// How long `jobsctl schedule run` waits for a worker to take the request.
const RUN_WAIT: Duration = Duration::from_secs(5);

/// Runs `jobsctl schedule` or `jobsctl schedule run NAME`.
pub(super) async fn run(
    admin: &Admin,
    json: bool,
    command: Option<ScheduleCommand>,
) -> Result<u8, CliError> {
    match command {
        None => list(admin, json).await,
        Some(ScheduleCommand::Run { name }) => {
            #[derive(Serialize)]
            struct Ran<'a> {
                schedule: &'a str,
                taken: bool,
            }
            admin.run_schedule(&name, RUN_WAIT).await?;
            print(
                json,
                &Ran {
                    schedule: &name,
                    taken: true,
                },
                |r| {
                    format!(
                        "A worker took schedule {} and pushed its job.\n",
                        r.schedule
                    )
                },
            )?;
            Ok(0)
        }
    }
}

async fn list(admin: &Admin, json: bool) -> Result<u8, CliError> {
    let schedules = admin.schedules().await?;
    print(json, &schedules, |schedules: &Vec<ScheduleInfo>| {
        if schedules.is_empty() {
            return "No schedules: no worker has run with --schedule.\n".to_owned();
        }
        let now = Utc::now();
        let rows = schedules
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    s.when.clone(),
                    s.queue.clone(),
                    s.next_tick
                        .map_or_else(|| "-".to_owned(), |at| relative(now, at)),
                    s.last_tick
                        .map_or_else(|| "never".to_owned(), |at| ago(now, at)),
                    s.last_outcome.clone().unwrap_or_else(|| "-".to_owned()),
                    match s.stale {
                        true => "stale: no worker keeps it".to_owned(),
                        false => "kept".to_owned(),
                    },
                ]
            })
            .collect();
        table(
            &[
                "NAME",
                "WHEN",
                "QUEUE",
                "NEXT",
                "LAST FIRED",
                "LAST OUTCOME",
                "STATE",
            ],
            rows,
        )
    })?;
    Ok(0)
}
