//! Moving failed jobs back onto their queues: one atomic call per job on one server; on a
//! Redis Cluster, where the failed-job store and the queues are in different slots, two calls
//! that can each be taken again.

use std::collections::BTreeMap;

use super::failed::{Retried, RetryReport, Stored};
use super::{Admin, AdminError, CHUNK};
use crate::payload::counters::{self, Counters};
use crate::payload::{Payload, RawFields};
use crate::queue::keys::{check_group_name, KeyLayout, Keys};
use crate::queue::scripts;

/// How long the guard of a retry lasts on a cluster: a retry taken again within it, after a
/// crash between its two steps, pushes nothing twice.
const RETRIED_GUARD_SECS: u64 = 24 * 3600;

/// What the push of one retried job found.
enum Pushed {
    /// Pushed back (or, on a cluster, pushed by an earlier try of the same retry).
    Back,
    /// Left in the store: another job holds its unique lock.
    Duplicate,
    /// Left alone: its record changed or went away since it was read.
    Changed,
}

impl Admin {
    /// Pushes `selected` back onto their queues with their counters reset, and removes their
    /// records, adding what happened to each to `report`.
    ///
    /// On one server each job moves in one `retry.lua` call, only if its record is still the
    /// one read. On a cluster, per chunk: the records are read again with the times their
    /// failures were recorded (their scores in the index), `retry_push.lua` in each queue's
    /// slot pushes the job unless the guard of the job's retries (by its uuid) says that this
    /// failure was, then `forget_unchanged.lua` removes the record
    /// if it is still the one read, recorded at the same time. A crash between the two leaves
    /// the record; the next retry finds the guard, pushes nothing, and removes it. A job that
    /// failed again meanwhile has a new record, or the same bytes recorded at a new time, which
    /// stays; retried, it is pushed back again.
    pub(super) async fn push_back(
        &self,
        selected: &[Stored],
        report: &mut RetryReport,
    ) -> Result<(), AdminError> {
        for chunk in selected.chunks(CHUNK) {
            let outcomes = match self.queue.layout() {
                KeyLayout::Standalone => self.retry_atomically(chunk).await?,
                KeyLayout::Cluster => self.retry_in_two_steps(chunk).await?,
            };
            for (stored, pushed) in chunk.iter().zip(outcomes) {
                let record = &stored.entry.record;
                match pushed {
                    Pushed::Back => report.retried.push(Retried {
                        uuid: record.uuid.clone(),
                        queue: record.queue.clone(),
                    }),
                    Pushed::Duplicate => report.duplicates.push(record.uuid.clone()),
                    Pushed::Changed => report.missing.push(record.uuid.clone()),
                }
            }
        }
        Ok(())
    }

    async fn retry_atomically(&self, chunk: &[Stored]) -> Result<Vec<Pushed>, AdminError> {
        let keys = self.queue.keys();
        // A job of a group goes back to its group, which the next call brings into its
        // queue's rotation: each retry's reply is at its own place among the calls.
        let mut calls = Vec::new();
        let mut retries = Vec::new();
        for stored in chunk {
            let record = &stored.entry.record;
            let group = group_of(stored);
            let queue = keys.queue(&record.queue).in_group(group.as_deref());
            let mut call = scripts::RETRY.key(keys.failed_jobs());
            call.key(keys.failed_jobs_index())
                .key(&queue.ready)
                .key(&queue.notify)
                .arg(&record.uuid)
                .arg(&stored.raw)
                .arg(fresh_payload(stored));
            add_unique_lock(&mut call, keys, stored);
            retries.push(calls.len());
            calls.push(call);
            if let Some(group) = &group {
                calls.push(self.queue.group_touch(&record.queue, &[group]));
            }
        }
        let replies: Vec<i64> = self
            .queue
            .invoke_all(&[&scripts::RETRY, &scripts::GROUP_TOUCH], &calls)
            .await?;
        Ok(retries
            .into_iter()
            .map(|at| pushed_of(replies[at]))
            .collect())
    }

    async fn retry_in_two_steps(&self, chunk: &[Stored]) -> Result<Vec<Pushed>, AdminError> {
        let keys = self.queue.keys();
        let failed_at = self.failure_times(chunk).await?;
        // One pipeline per queue: each within one slot. A record that changed since it was
        // read is left alone.
        let mut by_queue: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (at, stored) in chunk.iter().enumerate() {
            if failed_at[at].is_some() {
                by_queue
                    .entry(stored.entry.record.queue.as_str())
                    .or_default()
                    .push(at);
            }
        }
        let mut outcomes: Vec<Pushed> = chunk.iter().map(|_| Pushed::Changed).collect();
        for (queue_name, members) in by_queue {
            let mut calls: Vec<_> = Vec::new();
            let mut groups = Vec::new();
            let own = keys.queue(queue_name);
            for &at in &members {
                let stored = &chunk[at];
                let uuid = &stored.entry.record.uuid;
                let guard = keys.retried(queue_name, uuid);
                let grouped;
                let queue = match group_of(stored) {
                    Some(group) => {
                        grouped = own.for_group(&group);
                        groups.push(group);
                        &grouped
                    }
                    None => &own,
                };
                let mut call = scripts::RETRY_PUSH.key(&queue.ready);
                call.key(&queue.notify)
                    .key(guard)
                    .arg(uuid)
                    .arg(fresh_payload(stored))
                    .arg(failed_at[at].as_deref().unwrap_or_default())
                    .arg(RETRIED_GUARD_SECS);
                add_unique_lock(&mut call, keys, stored);
                calls.push(call);
            }
            // The groups jobs went back to join the rotation, after the pushes, in the
            // same pipeline; their reply follows the pushes'.
            if !groups.is_empty() {
                let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
                calls.push(self.queue.group_touch(queue_name, &groups));
            }
            let replies: Vec<i64> = self
                .queue
                .invoke_all(&[&scripts::RETRY_PUSH, &scripts::GROUP_TOUCH], &calls)
                .await?;
            for (at, reply) in members.into_iter().zip(replies) {
                outcomes[at] = pushed_of(reply);
            }
        }
        let removals: Vec<_> = chunk
            .iter()
            .zip(&outcomes)
            .zip(&failed_at)
            .filter(|((_, outcome), _)| matches!(outcome, Pushed::Back))
            .map(|((stored, _), failed_at)| {
                let mut call = scripts::FORGET_UNCHANGED.key(keys.failed_jobs());
                call.key(keys.failed_jobs_index())
                    .arg(&stored.entry.record.uuid)
                    .arg(&stored.raw)
                    .arg(failed_at.as_deref().unwrap_or_default());
                call
            })
            .collect();
        // A record gone or changed by now was removed by another try of this retry, or is the
        // record of a new failure of the job pushed here: either way the job went back once.
        let _: Vec<i64> = self
            .queue
            .invoke_all(&[&scripts::FORGET_UNCHANGED], &removals)
            .await?;
        Ok(outcomes)
    }
}

impl Admin {
    /// When the failure of each record of `chunk` was recorded (its score in the failed-job
    /// index, as Redis writes it; empty without one), read with the records in one transaction
    /// in the store's slot; `None` for a record gone or changed since it was read. With the
    /// record, it names one failure: a job that fails again can write the same bytes (in the
    /// same second, with the same exception), never at the same time.
    async fn failure_times(&self, chunk: &[Stored]) -> Result<Vec<Option<String>>, AdminError> {
        let keys = self.queue.keys();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for stored in chunk {
            let uuid = &stored.entry.record.uuid;
            pipe.hget(keys.failed_jobs(), uuid)
                .zscore(keys.failed_jobs_index(), uuid);
        }
        let mut conn = self.queue.connection();
        let read: Vec<(Option<String>, Option<String>)> =
            self.queue.timed(pipe.query_async(&mut conn)).await?;
        Ok(chunk
            .iter()
            .zip(read)
            .map(|(stored, (raw, failed_at))| {
                (raw.as_deref() == Some(stored.raw.as_str())).then(|| failed_at.unwrap_or_default())
            })
            .collect())
    }
}

fn pushed_of(reply: i64) -> Pushed {
    match reply {
        1 => Pushed::Back,
        2 => Pushed::Duplicate,
        _ => Pushed::Changed,
    }
}

/// The group of its queue a failed job waited in, which it goes back to (a name that is not a
/// group's: none).
fn group_of(stored: &Stored) -> Option<String> {
    RawFields::parse(&stored.entry.record.payload)
        .text("group")
        .filter(|group| check_group_name(group).is_ok())
}

/// The record's payload with its counters (attempts, exceptions, requeues, interruptions) set
/// to 0; every other byte kept.
fn fresh_payload(stored: &Stored) -> String {
    let payload = &stored.entry.record.payload;
    counters::with_counters(payload, Counters::default()).unwrap_or_else(|| payload.clone())
}

/// Adds a unique job's lock, to be taken again with the push, to a retry's call.
fn add_unique_lock(call: &mut redis::ScriptInvocation<'_>, keys: &Keys, stored: &Stored) {
    let record = &stored.entry.record;
    let unique = Payload::from_json(&record.payload)
        .ok()
        .and_then(|p| p.unique);
    if let Some(unique) = unique {
        call.key(keys.unique(&record.queue, &unique.key))
            .arg(unique.lasts.max(1) * 1000);
    }
}
