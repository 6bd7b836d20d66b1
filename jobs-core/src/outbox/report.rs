//! A relay's record for operators ([`Keys::outbox_relay`], listed in [`Keys::outbox_relays`]),
//! as a worker keeps its heartbeat: refreshed every [`RELAY_REPORT_EVERY`] with a measure of
//! its table, expiring after [`RELAY_TTL`] unless refreshed, removed when the relay stops.
//!
//! [`Keys::outbox_relay`]: crate::queue::keys::Keys::outbox_relay
//! [`Keys::outbox_relays`]: crate::queue::keys::Keys::outbox_relays

use chrono::Utc;
use sqlx::PgPool;
use std::time::Duration;
use tokio::time::Instant;

use crate::admin::{RelayInfo, RELAY_REPORT_EVERY, RELAY_TTL};
use crate::queue::{live, RedisQueue};

use super::Outbox;

/// Keeps one relay's record.
pub(super) struct Reporter {
    queue: RedisQueue,
    info: RelayInfo,
    next: Instant,
}

impl Reporter {
    /// A record for a relay of `table` starting now, into `queue`'s Redis; the first refresh
    /// is due at once.
    pub(super) fn new(queue: &RedisQueue, table: &str) -> Reporter {
        let now = Utc::now();
        Reporter {
            queue: queue.clone(),
            info: RelayInfo {
                id: uuid::Uuid::new_v4().to_string(),
                table: table.to_owned(),
                host: gethostname::gethostname().to_string_lossy().into_owned(),
                pid: std::process::id(),
                started_at: now,
                seen_at: now,
                relayed: 0,
                kept: 0,
                outbox: None,
            },
            next: Instant::now(),
        }
    }

    /// Counts what a pass did: rows relayed, rows kept with a problem.
    pub(super) fn count(&mut self, relayed: usize, kept: usize) {
        self.info.relayed += relayed as u64;
        self.info.kept += kept as u64;
    }

    /// The rows relayed and kept since the relay started.
    pub(super) fn counted(&self) -> (u64, u64) {
        (self.info.relayed, self.info.kept)
    }

    /// How long until the next refresh is due.
    pub(super) fn due_in(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Measures the table and refreshes the record, when due. A table that cannot be measured
    /// is recorded as unmeasured; a record that cannot be written waits for the next refresh
    /// (the relay's passes report the outage).
    pub(super) async fn report_if_due(&mut self, pool: &PgPool, outbox: &Outbox) {
        if Instant::now() < self.next {
            return;
        }
        self.next = Instant::now() + RELAY_REPORT_EVERY;
        self.info.outbox = match outbox.status(pool).await {
            Ok(status) => Some(status),
            Err(err) => {
                tracing::debug!(error = %err, "cannot measure the outbox for its record");
                None
            }
        };
        self.info.seen_at = Utc::now();
        let record = serde_json::to_string(&self.info).expect("a relay record serializes");
        let keys = self.queue.keys();
        let written: crate::Result<redis::Value> = self
            .queue
            .query_each(&live::record_commands(
                &keys.outbox_relays(),
                &keys.outbox_relay(&self.info.id),
                &self.info.id,
                &record,
                RELAY_TTL,
                self.info.seen_at,
            ))
            .await;
        if let Err(err) = written {
            tracing::debug!(error = %err, "cannot write the relay's record");
        }
    }

    /// Removes the record: the relay stopped.
    pub(super) async fn remove(&self) {
        let keys = self.queue.keys();
        let removed: crate::Result<redis::Value> = self
            .queue
            .query_each(&live::removal_commands(
                &keys.outbox_relays(),
                &keys.outbox_relay(&self.info.id),
                &self.info.id,
            ))
            .await;
        if let Err(err) = removed {
            tracing::debug!(error = %err, "cannot remove the relay's record; it expires");
        }
    }
}
