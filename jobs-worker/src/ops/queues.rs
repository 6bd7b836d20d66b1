//! `jobsctl size`, `clear`, `monitor`, `inspect`, `pause`, `resume` and `paused`: the queues.

use chrono::Utc;
use redjob::admin::{Admin, QueueStats, QueuedJob, Section};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};

use super::error::CliError;
use super::render::{print, relative, span, table};

/// Shows the sizes of `queues`, or of every queue Redis knows of.
pub(super) async fn size(admin: &Admin, json: bool, queues: Vec<String>) -> Result<u8, CliError> {
    let queues = if queues.is_empty() {
        admin.queues().await?
    } else {
        queues
    };
    let stats = admin.queues_stats(&queues).await?;
    print(json, &stats, |stats| size_table(stats))?;
    Ok(0)
}

/// Deletes every job of a queue, after asking on the terminal unless `force`.
pub(super) async fn clear(
    admin: &Admin,
    json: bool,
    queue: String,
    force: bool,
) -> Result<u8, CliError> {
    if !force {
        confirm_clear(admin, &queue).await?;
    }
    let deleted = admin.clear(&queue).await?;
    #[derive(Serialize)]
    struct Cleared<'a> {
        queue: &'a str,
        deleted: u64,
    }
    print(
        json,
        &Cleared {
            queue: &queue,
            deleted,
        },
        |c| format!("Deleted {} jobs from queue {}.\n", c.deleted, c.queue),
    )?;
    Ok(0)
}

/// Checks queue sizes against `max`, and waits against their thresholds: exit status 1 when a
/// queue holds more jobs, or has waited longer.
pub(super) async fn monitor(
    admin: &Admin,
    json: bool,
    queues: Vec<String>,
    max: Option<u64>,
) -> Result<u8, CliError> {
    #[derive(Serialize)]
    struct Monitored {
        #[serde(flatten)]
        stats: QueueStats,
        max: Option<u64>,
        over: bool,
    }
    let rows: Vec<Monitored> = admin
        .queues_stats(&queues)
        .await?
        .into_iter()
        .map(|stats| Monitored {
            over: max.is_some_and(|max| stats.size > max),
            stats,
            max,
        })
        .collect();
    print(json, &rows, |rows| {
        let stats: Vec<(QueueStats, bool)> =
            rows.iter().map(|r| (r.stats.clone(), r.over)).collect();
        monitor_table(&stats)
    })?;
    let over: Vec<String> = rows
        .iter()
        .filter(|r| r.over)
        .map(|r| format!("{} ({} jobs)", r.stats.name, r.stats.size))
        .collect();
    if let (Some(max), false) = (max, over.is_empty()) {
        eprintln!("jobsctl: over --max {max}: {}", over.join(", "));
    }
    let waiting: Vec<String> = rows
        .iter()
        .filter(|r| r.stats.wait_exceeded)
        .map(|r| {
            format!(
                "{} (waited {} s, threshold {} s)",
                r.stats.name,
                r.stats.wait_secs.unwrap_or(0),
                r.stats.wait_threshold_secs.unwrap_or(0)
            )
        })
        .collect();
    if !waiting.is_empty() {
        eprintln!("jobsctl: over wait threshold: {}", waiting.join(", "));
    }
    Ok(if over.is_empty() && waiting.is_empty() {
        0
    } else {
        1
    })
}

/// Shows the jobs of a queue, section by section, in the order workers take them.
pub(super) async fn inspect(
    admin: &Admin,
    json: bool,
    queue: String,
    section: Option<Section>,
    limit: usize,
) -> Result<u8, CliError> {
    let sections = match section {
        Some(section) => vec![section],
        None => Section::ALL.to_vec(),
    };
    let mut jobs = Vec::new();
    for section in sections {
        jobs.extend(admin.inspect(&queue, section, limit).await?);
    }
    print(json, &jobs, |jobs| inspect_table(jobs))?;
    Ok(0)
}

/// Makes workers skip a queue until it is resumed.
pub(super) async fn pause(admin: &Admin, json: bool, queue: String) -> Result<u8, CliError> {
    let changed = admin.pause(&queue).await?;
    print_toggle(json, &queue, true, changed)?;
    Ok(0)
}

/// Lets workers take jobs from a paused queue again.
pub(super) async fn resume(admin: &Admin, json: bool, queue: String) -> Result<u8, CliError> {
    let changed = admin.resume(&queue).await?;
    print_toggle(json, &queue, false, changed)?;
    Ok(0)
}

/// Lists the paused queues.
pub(super) async fn paused(admin: &Admin, json: bool) -> Result<u8, CliError> {
    let paused = admin.paused().await?;
    print(json, &paused, |names| {
        if names.is_empty() {
            "No paused queues.\n".to_owned()
        } else {
            names.iter().map(|n| format!("{n}\n")).collect()
        }
    })?;
    Ok(0)
}

/// Asks on the terminal before clearing a queue; refuses when there is no terminal to ask on.
async fn confirm_clear(admin: &Admin, queue: &str) -> Result<(), CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Invalid(format!(
            "refusing to clear queue {queue} without --force: stdin is not a terminal to ask on"
        )));
    }
    let size = admin.queue_stats(queue).await?.size;
    let mut stderr = std::io::stderr();
    write!(
        stderr,
        "Delete all {size} jobs of queue {queue} (ready, delayed and reserved)? [y/N] "
    )?;
    stderr.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(CliError::Invalid(format!(
            "queue {queue} not cleared: not confirmed"
        )))
    }
}

fn print_toggle(json: bool, queue: &str, paused: bool, changed: bool) -> Result<(), CliError> {
    #[derive(Serialize)]
    struct Toggle<'a> {
        queue: &'a str,
        paused: bool,
        changed: bool,
    }
    let toggle = Toggle {
        queue,
        paused,
        changed,
    };
    print(json, &toggle, |t| {
        let state = if t.paused { "paused" } else { "not paused" };
        if t.changed {
            let done = if t.paused { "paused" } else { "resumed" };
            format!("Queue {} {done}.\n", t.queue)
        } else {
            format!("Queue {} was already {state}.\n", t.queue)
        }
    })
}

fn size_table(stats: &[QueueStats]) -> String {
    if stats.is_empty() {
        return "No queues.\n".to_owned();
    }
    let headers = [
        "QUEUE", "SIZE", "READY", "DELAYED", "RESERVED", "OLDEST", "PAUSED",
    ];
    let rows = stats
        .iter()
        .map(|s| {
            let mut row = size_cells(s);
            row.push(paused_cell(s));
            row
        })
        .collect();
    table(&headers, rows)
}

/// A queue's name, sizes and oldest ready job's age: the cells `size` and `monitor` share. A
/// size that counts only some of the queue's groups (it has too many to read at once) ends in
/// `+`.
fn size_cells(s: &QueueStats) -> Vec<String> {
    let more = if s.groups_partial { "+" } else { "" };
    vec![
        s.name.clone(),
        format!("{}{more}", s.size),
        format!("{}{more}", s.ready),
        format!("{}{more}", s.delayed),
        format!("{}{more}", s.reserved),
        secs_cell(s.oldest_ready_secs),
    ]
}

fn paused_cell(s: &QueueStats) -> String {
    if s.paused { "yes" } else { "no" }.to_owned()
}

/// The sizes of each queue, its wait and threshold, and what is wrong with it: `OVER` (more
/// jobs than `--max`), `LONG WAIT` (waited longer than its threshold), or `OK`.
fn monitor_table(stats: &[(QueueStats, bool)]) -> String {
    let headers = [
        "QUEUE",
        "SIZE",
        "READY",
        "DELAYED",
        "RESERVED",
        "OLDEST",
        "WAIT",
        "THRESHOLD",
        "PAUSED",
        "STATUS",
    ];
    let rows = stats
        .iter()
        .map(|(s, over)| {
            let problems: Vec<&str> = [(*over, "OVER"), (s.wait_exceeded, "LONG WAIT")]
                .into_iter()
                .filter_map(|(found, problem)| found.then_some(problem))
                .collect();
            let mut row = size_cells(s);
            row.extend([
                secs_cell(s.wait_secs),
                secs_cell(s.wait_threshold_secs),
                paused_cell(s),
                if problems.is_empty() {
                    "OK".to_owned()
                } else {
                    problems.join(", ")
                },
            ]);
            row
        })
        .collect();
    table(&headers, rows)
}

/// A number of seconds as `table` shows it (`2m 5s`), `-` for none.
pub(super) fn secs_cell(secs: Option<u64>) -> String {
    secs.map_or_else(|| "-".to_owned(), |secs| span(secs as i64))
}

fn inspect_table(jobs: &[QueuedJob]) -> String {
    if jobs.is_empty() {
        return "No jobs.\n".to_owned();
    }
    let now = Utc::now();
    let rows = jobs
        .iter()
        .map(|j| {
            let at = match j.at {
                Some(at) if j.section == Section::Reserved => {
                    format!("expires {}", relative(now, at))
                }
                Some(at) => format!("due {}", relative(now, at)),
                None => "-".to_owned(),
            };
            vec![
                j.section.to_string(),
                j.uuid.clone().unwrap_or_else(|| "?".to_owned()),
                j.job.clone().unwrap_or_else(|| "?".to_owned()),
                j.attempts.map_or_else(|| "?".to_owned(), |a| a.to_string()),
                at,
            ]
        })
        .collect();
    table(&["SECTION", "UUID", "JOB", "ATTEMPTS", "WHEN"], rows)
}
