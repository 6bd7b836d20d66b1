//! `jobsctl failed`, `retry`, `forget`, `flush` and `prune-failed`: the failed-job store.

use redjob::admin::{Admin, AdminError, FailedEntry, FailedSelection, RetryReport};
use serde::Serialize;
use std::time::Duration;

use super::args::{FailedArgs, FailedShow, ForgetArgs, RetryArgs};
use super::error::CliError;
use super::render::{first_line, more, none_found, print, table};

/// Lists failed jobs, newest first, or shows one.
pub(super) async fn list(admin: &Admin, json: bool, args: FailedArgs) -> Result<u8, CliError> {
    match args.show {
        Some(FailedShow::Show { uuid }) => {
            let entry = admin.failed_job(&uuid).await?;
            print(json, &entry, show_failed)?;
        }
        None => {
            let filter = args.filter.filter(args.queue, args.limit);
            let page = admin.failed_page(&filter, args.after.as_deref()).await?;
            print(json, &page.entries, |e| {
                failed_table(e, page.next.as_deref())
            })?;
            more("failed jobs", page.next.as_deref());
        }
    }
    Ok(0)
}

/// Pushes failed jobs back onto their queues; names the uuids it did not find.
pub(super) async fn retry(admin: &Admin, json: bool, args: RetryArgs) -> Result<u8, CliError> {
    let selection = retry_selection(args)?;
    let report = admin.retry(&selection).await?;
    print_retried(json, &report)
}

/// Prints what a retry pushed back; fails naming the jobs it could not retry.
pub(super) fn print_retried(json: bool, report: &RetryReport) -> Result<u8, CliError> {
    print(json, report, |report| {
        let mut out = String::new();
        for job in &report.retried {
            out.push_str(&format!(
                "Pushed {} back onto queue {}.\n",
                job.uuid, job.queue
            ));
        }
        if report.retried.is_empty() && report.missing.is_empty() {
            out.push_str("No failed jobs to retry.\n");
        }
        out
    })?;
    if !report.missing.is_empty() {
        return Err(CliError::Incomplete(format!(
            "no failed job with uuid {} (unknown, or retried, forgotten or failed again meanwhile)",
            report.missing.join(", ")
        )));
    }
    if !report.duplicates.is_empty() {
        return Err(CliError::Incomplete(format!(
            "not retried: another job holds the unique lock of {} (left in the store)",
            report.duplicates.join(", ")
        )));
    }
    Ok(0)
}

/// Deletes failed-job records, by uuid or every one a filter matches; names the uuids it did
/// not find.
pub(super) async fn forget(admin: &Admin, json: bool, args: ForgetArgs) -> Result<u8, CliError> {
    if args.queue.is_some() || args.filter.any() {
        let filter = args.filter.filter(args.queue, None);
        let forgotten = admin.forget_matching(&filter).await?;
        print(json, &serde_json::json!({ "forgotten": forgotten }), |_| {
            format!("Forgot {forgotten} failed jobs.\n")
        })?;
        return Ok(0);
    }
    if args.uuids.is_empty() {
        return Err(CliError::Invalid(
            "say which failed jobs to forget: uuids, --queue Q or filters such as --job".into(),
        ));
    }
    let uuids = args.uuids;
    let mut missing = Vec::new();
    let mut forgotten = Vec::new();
    for uuid in uuids {
        match admin.forget(&uuid).await {
            Ok(()) => forgotten.push(uuid),
            Err(AdminError::FailedJobNotFound(uuid)) => missing.push(uuid),
            Err(err) => return Err(err.into()),
        }
    }
    #[derive(Serialize)]
    struct Forgotten {
        forgotten: Vec<String>,
        missing: Vec<String>,
    }
    let report = Forgotten { forgotten, missing };
    print(json, &report, |r| {
        r.forgotten
            .iter()
            .map(|uuid| format!("Forgot failed job {uuid}.\n"))
            .collect()
    })?;
    if !report.missing.is_empty() {
        return Err(CliError::Incomplete(format!(
            "no failed job with uuid {}",
            report.missing.join(", ")
        )));
    }
    Ok(0)
}

/// Deletes every failed job, or those older than `hours`.
pub(super) async fn flush(admin: &Admin, json: bool, hours: Option<f64>) -> Result<u8, CliError> {
    let age = hours.map(hours_to_duration).transpose()?;
    let deleted = admin.flush_failed(age).await?;
    print_deleted(json, deleted, hours)?;
    Ok(0)
}

/// Deletes the failed jobs older than `hours`.
pub(super) async fn prune(admin: &Admin, json: bool, hours: f64) -> Result<u8, CliError> {
    let deleted = admin.flush_failed(Some(hours_to_duration(hours)?)).await?;
    print_deleted(json, deleted, Some(hours))?;
    Ok(0)
}

fn retry_selection(args: RetryArgs) -> Result<FailedSelection, CliError> {
    if args.filter.any() {
        if args.range.is_some() || !args.targets.is_empty() {
            return Err(CliError::Invalid(
                "filters select the jobs to retry: give them without uuids, `all` or --range"
                    .into(),
            ));
        }
        return Ok(FailedSelection::Matching(
            args.filter.filter(args.queue, None),
        ));
    }
    if let Some(queue) = args.queue {
        return Ok(FailedSelection::Queue(queue));
    }
    if let Some(range) = args.range {
        let parsed = range.split_once('-').and_then(|(first, last)| {
            Some((first.trim().parse().ok()?, last.trim().parse().ok()?))
        });
        let Some((first, last)) = parsed else {
            return Err(CliError::Invalid(format!(
                "invalid --range {range:?}: expected A-B, like 1-5"
            )));
        };
        return Ok(FailedSelection::Range { first, last });
    }
    match args.targets.as_slice() {
        [] => Err(CliError::Invalid(
            "say which failed jobs to retry: all, uuids, --queue Q or --range A-B".into(),
        )),
        [all] if all == "all" => Ok(FailedSelection::All),
        uuids if uuids.iter().any(|u| u == "all") => Err(CliError::Invalid(
            "`all` cannot be combined with uuids".into(),
        )),
        uuids => Ok(FailedSelection::Uuids(uuids.to_vec())),
    }
}

fn hours_to_duration(hours: f64) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(hours * 3600.0)
        .map_err(|_| CliError::Invalid(format!("invalid --hours {hours}: expected hours ≥ 0")))
}

fn print_deleted(json: bool, deleted: u64, hours: Option<f64>) -> Result<(), CliError> {
    #[derive(Serialize)]
    struct Deleted {
        deleted: u64,
        older_than_hours: Option<f64>,
    }
    let report = Deleted {
        deleted,
        older_than_hours: hours,
    };
    print(json, &report, |r| match r.older_than_hours {
        Some(hours) => format!(
            "Deleted {} failed jobs older than {hours} hours.\n",
            r.deleted
        ),
        None => format!("Deleted {} failed jobs.\n", r.deleted),
    })
}

fn failed_table(entries: &[FailedEntry], next: Option<&str>) -> String {
    if entries.is_empty() {
        return none_found("failed jobs", next);
    }
    let rows = entries
        .iter()
        .map(|e| {
            vec![
                e.position.to_string(),
                e.record.uuid.clone(),
                e.record.queue.clone(),
                e.display_name.clone().unwrap_or_else(|| e.job.clone()),
                e.record.failed_at.clone(),
                first_line(&e.record.exception, 60),
            ]
        })
        .collect();
    table(
        &["#", "UUID", "QUEUE", "JOB", "FAILED AT", "EXCEPTION"],
        rows,
    )
}

fn show_failed(entry: &FailedEntry) -> String {
    let record = &entry.record;
    // As stored, byte for byte: re-encoding would reorder Laravel's fields.
    let payload = &record.payload;
    let attempts = entry
        .attempts
        .map_or_else(|| "?".to_owned(), |a| a.to_string());
    format!(
        "uuid:       {}\nposition:   {}\nqueue:      {}\nconnection: {}\njob:        {}\ntags:       {}\nattempts:   {attempts}\nfailed at:  {}\n\nexception:\n{}\n\npayload:\n{payload}\n",
        record.uuid,
        entry.position,
        record.queue,
        record.connection,
        entry.display_name.as_deref().unwrap_or(&entry.job),
        entry.tags.join(", "),
        record.failed_at,
        record.exception,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_ranges_parse_and_bad_ones_are_refused() {
        let args = |range: &str| RetryArgs {
            targets: vec![],
            queue: None,
            range: Some(range.into()),
            filter: Default::default(),
        };
        assert_eq!(
            retry_selection(args("2-5")).unwrap(),
            FailedSelection::Range { first: 2, last: 5 }
        );
        assert!(retry_selection(args("5")).is_err());
    }
}
