//! The `jobsctl` command: operating the queues from a terminal, on raw payloads, so it serves any
//! application without its job types.
//!
//! Every command prints a table for people, or one JSON document with `--json`, and exits
//! non-zero with a message on stderr when anything goes wrong. `docs/operations.md` is the
//! operator's guide. The binary is one line:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     jobs_worker::cli::main()
//! }
//! ```

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use jobs_core::admin::{
    Admin, AdminError, FailedEntry, FailedFilter, FailedSelection, QueueStats, QueuedJob, Section,
};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

/// The `jobsctl` command line.
#[derive(Debug, Parser)]
#[command(
    name = "jobsctl",
    about = "Operate the Redis queues: failed jobs, queue sizes and contents, pause, restart, workers.",
    version
)]
pub(super) struct Cli {
    /// Redis URL, as the worker's.
    #[arg(long, global = true, env = "REDIS_URL", default_value = jobs_core::queue::DEFAULT_REDIS_URL)]
    pub redis: String,

    /// Print one JSON document instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands of `jobsctl`.
#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// List failed jobs, newest first, or show one (`jobsctl failed show UUID`).
    Failed(FailedArgs),
    /// Push failed jobs back onto their queues with attempts reset to 0, and remove their
    /// records: `all`, uuids, `--queue Q` or `--range A-B` (positions as `jobsctl failed` shows).
    Retry(RetryArgs),
    /// Delete failed-job records.
    Forget {
        /// The uuids of the failed jobs.
        #[arg(required = true)]
        uuids: Vec<String>,
    },
    /// Delete every failed job, or only those older than --hours.
    Flush {
        /// Only those that failed more than this many hours ago.
        #[arg(long)]
        hours: Option<f64>,
    },
    /// Delete the failed jobs older than --hours.
    PruneFailed {
        /// Delete those that failed more than this many hours ago.
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
    },
    /// Sizes of queues: ready, delayed, reserved, the oldest ready job's age, paused (default:
    /// every queue Redis knows of).
    Size {
        /// Queue names.
        #[arg(value_parser = queue_name)]
        queues: Vec<String>,
    },
    /// Delete every job of a queue (ready, delayed and reserved). Asks first unless --force.
    Clear {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Do not ask.
        #[arg(long)]
        force: bool,
    },
    /// Check queue sizes against --max, for cron and alerting: exit status 1 when a queue has
    /// more jobs than that.
    Monitor {
        /// Queue names.
        #[arg(required = true, value_parser = queue_name)]
        queues: Vec<String>,
        /// The most jobs (ready + delayed + reserved) a queue may hold.
        #[arg(long)]
        max: u64,
    },
    /// Show the jobs of a queue: job, uuid, attempts, due or expiry time.
    Inspect {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// Only this section: ready, delayed or reserved (default: all three).
        section: Option<Section>,
        /// At most this many jobs per section.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Show the attempts workers finished last on a queue, newest first.
    Recent {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Ask every worker to exit (status 0) once its running jobs are done, for deploys.
    Restart,
    /// Make workers skip a queue until it is resumed.
    Pause {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
    },
    /// Let workers take jobs from a paused queue again.
    Resume {
        /// The queue's name.
        #[arg(value_parser = queue_name)]
        queue: String,
    },
    /// List the paused queues.
    Paused,
    /// List the live workers.
    Workers,
    /// Serve the live web dashboard (see docs/operations.md).
    Dashboard(super::dashboard::DashboardArgs),
}

/// A queue name from the command line, refused by the rule workers and dispatch apply.
fn queue_name(name: &str) -> Result<String, jobs_core::keys::InvalidQueueName> {
    jobs_core::keys::check_queue_name(name)?;
    Ok(name.to_owned())
}

/// `jobsctl failed`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct FailedArgs {
    /// Show one failed job.
    #[command(subcommand)]
    pub show: Option<FailedShow>,
    /// Only jobs that failed on this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs of this type (the payload's job or displayName).
    #[arg(long)]
    pub job: Option<String>,
    /// Only jobs whose exception, payload or uuid contains this text (ignoring case).
    #[arg(long)]
    pub search: Option<String>,
    /// At most this many.
    #[arg(long)]
    pub limit: Option<usize>,
}

/// `jobsctl failed show UUID`.
#[derive(Debug, Subcommand)]
pub(super) enum FailedShow {
    /// Show one failed job: its record, payload and exception.
    Show {
        /// The failed job's uuid.
        uuid: String,
    },
}

/// `jobsctl retry`.
#[derive(Debug, Args)]
pub(super) struct RetryArgs {
    /// `all`, or the uuids of failed jobs.
    pub targets: Vec<String>,
    /// Every failed job of this queue.
    #[arg(long, conflicts_with_all = ["targets", "range"], value_parser = queue_name)]
    pub queue: Option<String>,
    /// Positions A to B, as `jobsctl failed` numbers them (1 is the oldest).
    #[arg(long, conflicts_with_all = ["targets", "queue"])]
    pub range: Option<String>,
}

/// What can stop a command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(super) enum CliError {
    /// An operation on Redis failed.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The arguments cannot be acted on.
    #[error("{0}")]
    Invalid(String),
    /// Some of what was asked for was not done.
    #[error("{0}")]
    Incomplete(String),
    /// The terminal could not be read or written.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
    /// The dashboard could not run.
    #[error(transparent)]
    Dashboard(#[from] super::dashboard::DashboardError),
}

/// Parses the command line, runs the command and returns its exit status: 0 on success, 1
/// on any error (printed to stderr as `jobsctl: ...`) and when `jobsctl monitor` finds a queue over
/// its maximum, 2 when the command line does not parse.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("jobsctl: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("jobsctl: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command; returns the exit status it asks for (0, or 1 for `monitor` over its
/// maximum).
pub(super) async fn run(cli: Cli) -> Result<u8, CliError> {
    let admin = Admin::open(&cli.redis)?;
    let json = cli.json;
    match cli.command {
        Command::Dashboard(args) => super::dashboard::serve(admin, args).await?,
        Command::Failed(args) => match args.show {
            Some(FailedShow::Show { uuid }) => {
                let entry = admin.failed_job(&uuid).await?;
                print(json, &entry, show_failed)?;
            }
            None => {
                let filter = FailedFilter {
                    queue: args.queue,
                    job: args.job,
                    text: args.search,
                    limit: args.limit,
                };
                let entries = admin.failed(&filter).await?;
                print(json, &entries, |e| failed_table(e))?;
            }
        },
        Command::Retry(args) => {
            let selection = retry_selection(args)?;
            let report = admin.retry(&selection).await?;
            print(json, &report, |report| {
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
        }
        Command::Forget { uuids } => {
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
        }
        Command::Flush { hours } => {
            let age = hours.map(hours_to_duration).transpose()?;
            let deleted = admin.flush_failed(age).await?;
            print_deleted(json, deleted, hours)?;
        }
        Command::PruneFailed { hours } => {
            let deleted = admin.flush_failed(Some(hours_to_duration(hours)?)).await?;
            print_deleted(json, deleted, Some(hours))?;
        }
        Command::Size { queues } => {
            let queues = if queues.is_empty() {
                admin.queues().await?
            } else {
                queues
            };
            let stats = admin.queues_stats(&queues).await?;
            print(json, &stats, |stats| size_table(stats, None))?;
        }
        Command::Clear { queue, force } => {
            if !force {
                confirm_clear(&admin, &queue).await?;
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
        }
        Command::Monitor { queues, max } => {
            #[derive(Serialize)]
            struct Monitored {
                #[serde(flatten)]
                stats: QueueStats,
                max: u64,
                over: bool,
            }
            let rows: Vec<Monitored> = admin
                .queues_stats(&queues)
                .await?
                .into_iter()
                .map(|stats| Monitored {
                    over: stats.size > max,
                    stats,
                    max,
                })
                .collect();
            print(json, &rows, |rows| {
                let stats: Vec<QueueStats> = rows.iter().map(|r| r.stats.clone()).collect();
                size_table(&stats, Some(max))
            })?;
            let over: Vec<String> = rows
                .iter()
                .filter(|r| r.over)
                .map(|r| format!("{} ({} jobs)", r.stats.name, r.stats.size))
                .collect();
            if !over.is_empty() {
                eprintln!("jobsctl: over --max {max}: {}", over.join(", "));
                return Ok(1);
            }
        }
        Command::Inspect {
            queue,
            section,
            limit,
        } => {
            let sections = match section {
                Some(section) => vec![section],
                None => Section::ALL.to_vec(),
            };
            let mut jobs = Vec::new();
            for section in sections {
                jobs.extend(admin.inspect(&queue, section, limit).await?);
            }
            print(json, &jobs, |jobs| inspect_table(jobs))?;
        }
        Command::Recent { queue, limit } => {
            let recent = admin.recent(&queue, limit).await?;
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
                        "FINISHED", "OUTCOME", "UUID", "JOB", "ATTEMPT", "RUNTIME", "WORKER",
                        "REASON",
                    ],
                    rows,
                )
            })?;
        }
        Command::Restart => {
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
        }
        Command::Pause { queue } => {
            let changed = admin.pause(&queue).await?;
            print_toggle(json, &queue, true, changed)?;
        }
        Command::Resume { queue } => {
            let changed = admin.resume(&queue).await?;
            print_toggle(json, &queue, false, changed)?;
        }
        Command::Paused => {
            let paused = admin.paused().await?;
            print(json, &paused, |names| {
                if names.is_empty() {
                    "No paused queues.\n".to_owned()
                } else {
                    names.iter().map(|n| format!("{n}\n")).collect()
                }
            })?;
        }
        Command::Workers => {
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
        }
    }
    Ok(0)
}

fn retry_selection(args: RetryArgs) -> Result<FailedSelection, CliError> {
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

/// Prints `value` as JSON, or as `human` renders it.
fn print<T: Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce(&T) -> String,
) -> Result<(), CliError> {
    let text = if json {
        let mut text = serde_json::to_string_pretty(value).expect("command output serializes");
        text.push('\n');
        text
    } else {
        human(value)
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
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

fn failed_table(entries: &[FailedEntry]) -> String {
    if entries.is_empty() {
        return "No failed jobs.\n".to_owned();
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
        "uuid:       {}\nposition:   {}\nqueue:      {}\nconnection: {}\njob:        {}\nattempts:   {attempts}\nfailed at:  {}\n\nexception:\n{}\n\npayload:\n{payload}\n",
        record.uuid,
        entry.position,
        record.queue,
        record.connection,
        entry.display_name.as_deref().unwrap_or(&entry.job),
        record.failed_at,
        record.exception,
    )
}

fn size_table(stats: &[QueueStats], max: Option<u64>) -> String {
    if stats.is_empty() {
        return "No queues.\n".to_owned();
    }
    let mut headers = vec![
        "QUEUE", "SIZE", "READY", "DELAYED", "RESERVED", "OLDEST", "PAUSED",
    ];
    if max.is_some() {
        headers.push("STATUS");
    }
    let rows = stats
        .iter()
        .map(|s| {
            let mut row = vec![
                s.name.clone(),
                s.size.to_string(),
                s.ready.to_string(),
                s.delayed.to_string(),
                s.reserved.to_string(),
                s.oldest_ready_secs
                    .map_or_else(|| "-".to_owned(), |secs| span(secs as i64)),
                if s.paused { "yes" } else { "no" }.to_owned(),
            ];
            if let Some(max) = max {
                let status = if s.size > max { "OVER" } else { "OK" };
                row.push(status.to_owned());
            }
            row
        })
        .collect();
    table(&headers, rows)
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

/// Left-aligned columns, two spaces apart.
fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header_cells: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_cells).chain(rows.iter()) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The first line of `text`, cut to `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// `at` against `now`: `5s ago`, or `in 2m 5s`, with the time itself.
fn relative(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    let when = at.format("%Y-%m-%d %H:%M:%S");
    if secs >= 0 {
        format!("{when} (in {})", span(secs))
    } else {
        format!("{when} ({} ago)", span(-secs))
    }
}

fn ago(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    format!("{} ago", span((now - at).num_seconds().max(0)))
}

/// A number of seconds as `45s`, `2m 5s`, `3h 4m` or `2d 3h`.
fn span(secs: i64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_naturally() {
        assert_eq!(span(45), "45s");
        assert_eq!(span(125), "2m 5s");
        assert_eq!(span(3 * 3600 + 240), "3h 4m");
        assert_eq!(span(2 * 86400 + 3 * 3600), "2d 3h");
    }

    #[test]
    fn tables_align_columns() {
        let out = table(
            &["A", "LONGER"],
            vec![
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(out, "A    LONGER\nxyz  1\nq    22\n");
    }

    #[test]
    fn retry_ranges_parse_and_bad_ones_are_refused() {
        let args = |range: &str| RetryArgs {
            targets: vec![],
            queue: None,
            range: Some(range.into()),
        };
        assert_eq!(
            retry_selection(args("2-5")).unwrap(),
            FailedSelection::Range { first: 2, last: 5 }
        );
        assert!(retry_selection(args("5")).is_err());
    }
}
