//! `jobsctl batches`: batches and their progress.

use chrono::Utc;
use redjob::admin::{Admin, BatchDetail, BatchFilter, BatchState};
use redjob::workflow::BatchStatus;
use serde::Serialize;

use super::args::BatchCommand;
use super::error::CliError;
use super::failed::print_retried;
use super::render::{ago, more, none_found, print, table};

/// Runs `jobsctl batches` or one of its subcommands.
pub(super) async fn run(
    admin: &Admin,
    json: bool,
    command: Option<BatchCommand>,
    filter: &BatchFilter,
    after: Option<String>,
    limit: usize,
) -> Result<u8, CliError> {
    match command {
        None => list(admin, json, filter, after, limit).await,
        Some(BatchCommand::Show { id }) => show(admin, json, &id).await,
        Some(BatchCommand::Cancel { id }) => cancel(admin, json, &id).await,
        Some(BatchCommand::Retry { id }) => {
            let report = admin.retry_batch(&id).await?;
            print_retried(json, &report)
        }
        Some(BatchCommand::Prune { hours }) => prune(admin, json, hours).await,
    }
}

async fn list(
    admin: &Admin,
    json: bool,
    filter: &BatchFilter,
    after: Option<String>,
    limit: usize,
) -> Result<u8, CliError> {
    let page = admin.batches_page(filter, after.as_deref(), limit).await?;
    let batches = page.batches;
    print(json, &batches, |batches: &Vec<BatchStatus>| {
        if batches.is_empty() {
            return none_found("batches", page.next.as_deref());
        }
        let now = Utc::now();
        let rows = batches
            .iter()
            .map(|b| {
                vec![
                    b.id.to_string(),
                    b.name.clone(),
                    format!("{}%", b.progress()),
                    b.total.to_string(),
                    b.pending.to_string(),
                    b.failed.to_string(),
                    state(b),
                    b.created_at.map_or_else(String::new, |at| ago(now, at)),
                ]
            })
            .collect();
        table(
            &[
                "ID", "NAME", "PROGRESS", "TOTAL", "PENDING", "FAILED", "STATE", "CREATED",
            ],
            rows,
        )
    })?;
    more("batches", page.next.as_deref());
    Ok(0)
}

async fn show(admin: &Admin, json: bool, id: &str) -> Result<u8, CliError> {
    let detail = admin.batch(id).await?;
    print(json, &detail, |d: &BatchDetail| {
        let b = &d.status;
        let now = Utc::now();
        let when = |at: Option<chrono::DateTime<Utc>>| {
            at.map_or_else(|| "-".to_owned(), |at| ago(now, at))
        };
        let mut out = format!(
            "Batch {}{}\nState:     {}\nProgress:  {}% ({} of {} settled)\nPending:   {}\nFailed:    {}\nAllows failures: {}\nCreated:   {}\nCancelled: {}\nFinished:  {}\n",
            b.id,
            if b.name.is_empty() { String::new() } else { format!(" ({})", b.name) },
            state(b),
            b.progress(),
            b.processed(),
            b.total,
            b.pending,
            b.failed,
            if b.allow_failures { "yes" } else { "no" },
            when(b.created_at),
            when(b.cancelled_at),
            when(b.finished_at),
        );
        if !d.failed_jobs.is_empty() {
            out.push_str("Failed jobs (jobsctl failed show UUID):\n");
            for uuid in &d.failed_jobs {
                out.push_str(&format!("  {uuid}\n"));
            }
        }
        out
    })?;
    Ok(0)
}

async fn cancel(admin: &Admin, json: bool, id: &str) -> Result<u8, CliError> {
    #[derive(Serialize)]
    struct Cancelled<'a> {
        id: &'a str,
        cancelled: bool,
    }
    let cancelled = admin.cancel_batch(id).await?;
    print(json, &Cancelled { id, cancelled }, |c| {
        if c.cancelled {
            format!(
                "Cancelled batch {}: its jobs not started yet are skipped.\n",
                c.id
            )
        } else {
            format!("Batch {} was cancelled already.\n", c.id)
        }
    })?;
    Ok(0)
}

async fn prune(admin: &Admin, json: bool, hours: u64) -> Result<u8, CliError> {
    #[derive(Serialize)]
    struct Pruned {
        pruned: Vec<String>,
    }
    let pruned = Pruned {
        pruned: admin.prune_batches(hours).await?,
    };
    print(json, &pruned, |p| {
        format!(
            "Deleted {} batch{} finished more than {hours} hours ago.\n",
            p.pruned.len(),
            if p.pruned.len() == 1 { "" } else { "es" }
        )
    })?;
    Ok(0)
}

/// A batch's state in words.
fn state(batch: &BatchStatus) -> String {
    BatchState::of(batch).as_str().replace('-', " ")
}
