//! `jobsctl outbox`: the outbox tables as their live relays report them (Redis alone), or
//! measured now in the database (`--database`, feature `postgres`), and the table's SQL.

use chrono::Utc;
use redjob::admin::{Admin, OutboxReport, OutboxStatus, RelayInfo};
use serde::Serialize;

use super::args::{OutboxArgs, OutboxCommand};
use super::error::CliError;
use super::render::{ago, print, span, table};

/// What `jobsctl outbox` shows.
#[derive(Debug, Serialize)]
struct Outboxes {
    /// Each table, with its newest measure.
    tables: Vec<TableView>,
    /// The live relays.
    relays: Vec<RelayInfo>,
}

/// One table, with where its figures come from.
#[derive(Debug, Serialize)]
struct TableView {
    #[serde(flatten)]
    report: OutboxReport,
    /// Where the figures come from (when there are any).
    measured_by: Source,
}

/// Who measured a table.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
enum Source {
    /// The newest record of a live relay.
    Relay,
    /// This command, in the database.
    Database,
}

impl Source {
    /// Its name, as the JSON output writes it.
    fn as_str(self) -> &'static str {
        match self {
            Source::Relay => "relay",
            Source::Database => "database",
        }
    }
}

/// Runs `jobsctl outbox`.
pub(super) async fn run(admin: &Admin, json: bool, args: OutboxArgs) -> Result<u8, CliError> {
    match args.command {
        Some(OutboxCommand::Schema) => schema(args.table.as_deref()),
        None => show(admin, json, args.database.as_deref(), args.table).await,
    }
}

async fn show(
    admin: &Admin,
    json: bool,
    database: Option<&str>,
    only: Option<String>,
) -> Result<u8, CliError> {
    let mut relays = admin.outbox_relays().await?;
    if let Some(only) = &only {
        relays.retain(|relay| &relay.table == only);
    }
    let mut tables: Vec<TableView> = OutboxReport::from_relays(&relays)
        .into_iter()
        .map(|report| TableView {
            report,
            measured_by: Source::Relay,
        })
        .collect();
    if let Some(url) = database {
        let status = measure(url, only.as_deref()).await?;
        match tables.iter_mut().find(|t| t.report.table == status.table) {
            Some(view) => {
                view.report.status = Some(status);
                view.measured_by = Source::Database;
            }
            None => tables.push(TableView {
                report: OutboxReport {
                    table: status.table.clone(),
                    relays: 0,
                    status: Some(status),
                },
                measured_by: Source::Database,
            }),
        }
    }
    print(json, &Outboxes { tables, relays }, render)?;
    Ok(0)
}

fn render(outboxes: &Outboxes) -> String {
    if outboxes.tables.is_empty() {
        return "No live outbox relays (give --database to measure a table).\n".to_owned();
    }
    let now = Utc::now();
    let figures = |status: &Option<OutboxStatus>| match status {
        Some(s) => [s.waiting.to_string(), s.kept.to_string(), lag(s.lag())],
        None => ["?".to_owned(), "?".to_owned(), "?".to_owned()],
    };
    let rows = outboxes
        .tables
        .iter()
        .map(|view| {
            let [waiting, kept, lag] = figures(&view.report.status);
            let measured = match &view.report.status {
                Some(status) => format!(
                    "{} by the {}",
                    ago(now, status.measured_at),
                    view.measured_by.as_str()
                ),
                None => "not measured".to_owned(),
            };
            vec![
                view.report.table.clone(),
                view.report.relays.to_string(),
                waiting,
                kept,
                lag,
                measured,
            ]
        })
        .collect();
    let mut out = table(
        &["TABLE", "RELAYS", "WAITING", "KEPT", "LAG", "MEASURED"],
        rows,
    );
    for view in &outboxes.tables {
        let waiting = view.report.status.as_ref().is_some_and(|s| s.waiting > 0);
        if view.report.relays == 0 && waiting {
            out.push_str(&format!(
                "No live relay serves {}: its rows wait until a worker relays it.\n",
                view.report.table
            ));
        }
    }
    if !outboxes.relays.is_empty() {
        let rows = outboxes
            .relays
            .iter()
            .map(|relay| {
                vec![
                    relay.table.clone(),
                    relay.host.clone(),
                    relay.pid.to_string(),
                    relay.relayed.to_string(),
                    relay.kept.to_string(),
                    ago(now, relay.started_at),
                    ago(now, relay.seen_at),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &[
                "RELAY OF", "HOST", "PID", "RELAYED", "KEPT", "STARTED", "SEEN",
            ],
            rows,
        ));
    }
    out
}

/// A lag as `0.4s` under a minute, else as `2m 5s`.
fn lag(lag: std::time::Duration) -> String {
    match lag.as_secs() {
        0..60 => format!("{:.1}s", lag.as_secs_f64()),
        secs => span(secs as i64),
    }
}

/// The table `only` (the default one when `None`), measured now through `url`.
#[cfg(feature = "postgres")]
async fn measure(url: &str, only: Option<&str>) -> Result<OutboxStatus, CliError> {
    use sqlx::Connection;
    let outbox = outbox(only)?;
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .map_err(|err| CliError::Invalid(format!("cannot connect to {url}: {err}")))?;
    let status = outbox.status(&mut conn).await;
    let _ = conn.close().await;
    status.map_err(|err| CliError::Invalid(err.to_string()))
}

#[cfg(not(feature = "postgres"))]
async fn measure(_url: &str, _only: Option<&str>) -> Result<OutboxStatus, CliError> {
    Err(without_postgres("--database"))
}

#[cfg(feature = "postgres")]
fn schema(only: Option<&str>) -> Result<u8, CliError> {
    print!("{}", outbox(only)?.schema());
    Ok(0)
}

#[cfg(not(feature = "postgres"))]
fn schema(_only: Option<&str>) -> Result<u8, CliError> {
    Err(without_postgres("outbox schema"))
}

/// The outbox `only` names, or the default one.
#[cfg(feature = "postgres")]
fn outbox(only: Option<&str>) -> Result<redjob::outbox::Outbox, CliError> {
    match only {
        Some(table) => {
            redjob::outbox::Outbox::table(table).map_err(|err| CliError::Invalid(err.to_string()))
        }
        None => Ok(redjob::outbox::Outbox::default()),
    }
}

#[cfg(not(feature = "postgres"))]
fn without_postgres(what: &str) -> CliError {
    CliError::Invalid(format!(
        "{what} needs PostgreSQL: this jobsctl was built without redjob-worker's `postgres` feature"
    ))
}
