//! The outbox relays as they report themselves: which are alive, and what each last measured of
//! its table. Relays (feature `postgres`) write these records; operators read them here
//! without a database connection, so `jobsctl`, the dashboard and the Prometheus gauges need
//! Redis alone.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::{Admin, AdminError};

/// How often a relay refreshes its record, with a new measure of its table.
pub const RELAY_REPORT_EVERY: Duration = Duration::from_secs(5);

/// How long a relay's record lives without being refreshed; one that expires belongs to a
/// relay that died.
pub const RELAY_TTL: Duration = Duration::from_secs(30);

/// What an outbox table held when it was measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxStatus {
    /// The table's name.
    pub table: String,
    /// Committed rows waiting for a relay.
    pub waiting: u64,
    /// Rows a relay kept instead of pushing (a duplicate unique job, a row that holds no job),
    /// with the reason in their `problem` column; they wait for an operator.
    pub kept: u64,
    /// When the oldest waiting row was written, by the database's clock.
    pub oldest_waiting_at: Option<DateTime<Utc>>,
    /// When the table was measured, by the database's clock.
    pub measured_at: DateTime<Utc>,
}

impl OutboxStatus {
    /// How far the relays were behind when measured: the oldest waiting row's age, zero when
    /// none waited.
    pub fn lag(&self) -> Duration {
        self.oldest_waiting_at
            .and_then(|oldest| (self.measured_at - oldest).to_std().ok())
            .unwrap_or_default()
    }
}

/// One live relay, as its record ([`Keys::outbox_relay`](crate::queue::keys::Keys::outbox_relay))
/// holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayInfo {
    /// A unique id for this relay (a v4 uuid).
    pub id: String,
    /// The outbox table it relays.
    pub table: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When it started, by its clock.
    pub started_at: DateTime<Utc>,
    /// When it last refreshed this record, by its clock.
    pub seen_at: DateTime<Utc>,
    /// Rows it has pushed (or found pushed already) and deleted since it started.
    pub relayed: u64,
    /// Rows it has kept with a problem since it started.
    pub kept: u64,
    /// What it last measured of its table; `None` when it could not.
    pub outbox: Option<OutboxStatus>,
}

impl Admin {
    /// The live outbox relays, by table, then host and pid: those whose record has not
    /// expired ([`RELAY_TTL`]).
    pub async fn outbox_relays(&self) -> Result<Vec<RelayInfo>, AdminError> {
        let keys = self.queue.keys();
        let mut relays: Vec<RelayInfo> = self
            .live_records(&keys.outbox_relays(), |id| keys.outbox_relay(id))
            .await?;
        relays.sort_by(|a, b| (&a.table, &a.host, a.pid).cmp(&(&b.table, &b.host, b.pid)));
        Ok(relays)
    }

    /// Each relayed outbox table's latest measure, from its live relays' records, with how
    /// many relays serve it; by table name. A table no live relay serves is not listed.
    pub async fn outboxes(&self) -> Result<Vec<OutboxReport>, AdminError> {
        Ok(OutboxReport::from_relays(&self.outbox_relays().await?))
    }
}

/// An outbox table as its live relays report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxReport {
    /// The table's name.
    pub table: String,
    /// How many live relays serve it.
    pub relays: usize,
    /// The newest measure any of them made; `None` when none could measure it.
    pub status: Option<OutboxStatus>,
}

impl OutboxReport {
    /// The tables `relays` serve, each with its newest measure.
    pub fn from_relays(relays: &[RelayInfo]) -> Vec<OutboxReport> {
        let mut reports: BTreeMap<&str, OutboxReport> = BTreeMap::new();
        for relay in relays {
            let report = reports.entry(&relay.table).or_insert_with(|| OutboxReport {
                table: relay.table.clone(),
                relays: 0,
                status: None,
            });
            report.relays += 1;
            if let Some(status) = &relay.outbox {
                let newer = report
                    .status
                    .as_ref()
                    .is_none_or(|known| status.measured_at > known.measured_at);
                if newer {
                    report.status = Some(status.clone());
                }
            }
        }
        reports.into_values().collect()
    }
}
