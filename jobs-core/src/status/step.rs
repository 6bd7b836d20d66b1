//! A job's status as settling it changes it ([`SettleStep`]): on one server the `status`
//! effect of the settling call (`lib/status.lua`), so the outcome is written in the step that
//! acknowledges the job; on a cluster, where the record lives in another slot, commands of
//! their own before the reservation is removed.

use async_trait::async_trait;
use std::time::Duration;

use crate::error::Result;
use crate::queue::effects::Effects;
use crate::queue::events::xadd;
use crate::queue::settle::{Ending, SettleStep};
use crate::queue::RedisQueue;
use crate::status::record::JobState;

/// What settling one attempt writes to its job's status.
#[derive(Debug)]
pub(crate) struct StatusStep {
    pub(crate) uuid: String,
    pub(crate) state: JobState,
    /// Put back by a stopping worker: its event says `interrupted`, not `released`.
    pub(crate) interrupted: bool,
    pub(crate) attempt: u32,
    pub(crate) queue: String,
    pub(crate) job: String,
    /// The last progress reported, flushed with the outcome.
    pub(crate) progress: Option<String>,
    /// The field that holds the outcome (`result`, `error`) and its value.
    pub(crate) outcome: Option<(&'static str, String)>,
    /// How long the record is kept from now; `None` for a job that keeps none (an untracked
    /// job cancelled, or in a queue whose events are on).
    pub(crate) keep: Option<Duration>,
    /// The length of the queue's events stream, when its events are on.
    pub(crate) events: Option<u64>,
    /// The batch the job belongs to, whose results keep its result too.
    pub(crate) batch: Option<String>,
}

impl StatusStep {
    /// The event this settling appends to the queue's stream.
    fn event(&self) -> &'static str {
        match self.state {
            JobState::Done => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            _ if self.interrupted => "interrupted",
            _ => "released",
        }
    }
}

#[async_trait]
impl SettleStep for StatusStep {
    /// A done job that keeps no record and is in no batch: its only effect is its
    /// `completed` event, which the acker's acknowledgement appends.
    fn covered_by_acknowledgement(&self) -> bool {
        self.state == JobState::Done && self.keep.is_none() && self.batch.is_none()
    }

    async fn effects(&self, queue: &RedisQueue, _ending: Ending, into: &mut Effects) -> Result<()> {
        let keys = queue.keys();
        let (field, value) = self.outcome.clone().unwrap_or(("", String::new()));
        let record = keys.status(&self.uuid);
        let batch_results = match &self.batch {
            Some(batch) => keys.batch_results(batch),
            None => record.clone(),
        };
        into.add(
            "status",
            [
                record,
                keys.cancel_requests(),
                keys.settled_signals(),
                keys.events(&self.queue),
                batch_results,
            ],
            [
                self.uuid.clone(),
                self.state.as_str().to_owned(),
                self.attempt.to_string(),
                self.queue.clone(),
                self.job.clone(),
                self.progress.clone().unwrap_or_default(),
                field.to_owned(),
                value,
                self.keep.map_or(0, |keep| keep.as_millis()).to_string(),
                self.events.unwrap_or(0).to_string(),
                self.event().to_owned(),
                if self.batch.is_some() { "1" } else { "" }.to_owned(),
            ],
        );
        Ok(())
    }

    /// The record first, then the signals: two sends of commands of their own, each in its
    /// own slot, sent together (`query_each`). Taken again after a crash, each writes the same.
    async fn on_cluster(&self, queue: &RedisQueue, _ending: Ending) -> Result<()> {
        let keys = queue.keys();
        let final_state = self.state.is_final();
        if let Some(keep) = self.keep {
            let keep_ms = keep.as_millis() as u64;
            let record = keys.status(&self.uuid);
            let mut hset = redis::cmd("HSET");
            hset.arg(&record)
                .arg("state")
                .arg(self.state.as_str())
                .arg("attempt")
                .arg(self.attempt)
                .arg("queue")
                .arg(&self.queue)
                .arg("job")
                .arg(&self.job)
                .arg("updated_ms")
                .arg(chrono::Utc::now().timestamp_millis());
            if let Some(progress) = &self.progress {
                hset.arg("progress").arg(progress);
            }
            if let Some((field, value)) = &self.outcome {
                hset.arg(*field).arg(value);
            }
            let mut records = vec![
                hset,
                redis::cmd("PEXPIRE").arg(&record).arg(keep_ms).clone(),
            ];
            if let (Some(batch), Some(("result", result))) = (&self.batch, &self.outcome) {
                let results = keys.batch_results(batch);
                records.push(
                    redis::cmd("HSET")
                        .arg(&results)
                        .arg(&self.uuid)
                        .arg(result)
                        .clone(),
                );
                records.push(redis::cmd("PEXPIRE").arg(&results).arg(keep_ms).clone());
            }
            queue.query_each::<()>(&records).await?;
        }
        let mut signals = Vec::new();
        if let (Some(_), true) = (self.keep, final_state) {
            signals.push(xadd(
                &keys.settled_signals(),
                10_000,
                &[("uuid", &self.uuid), ("state", self.state.as_str())],
            ));
        }
        if let Some(maxlen) = self.events {
            let data = self
                .outcome
                .as_ref()
                .map_or("", |(_, value)| value.as_str());
            let attempt = self.attempt.to_string();
            let fields = [
                ("event", self.event()),
                ("uuid", self.uuid.as_str()),
                ("job", self.job.as_str()),
                ("attempt", attempt.as_str()),
                ("data", data),
            ];
            signals.push(xadd(&keys.events(&self.queue), maxlen, &fields));
        }
        if final_state {
            signals.push(
                redis::cmd("ZREM")
                    .arg(keys.cancel_requests())
                    .arg(&self.uuid)
                    .clone(),
            );
        }
        if !signals.is_empty() {
            queue.query_each::<()>(&signals).await?;
        }
        Ok(())
    }
}
