//! A queue's events, read live from any process: `queued`, `active`, `progress`,
//! `completed`, `failed`, `released`, `interrupted` and `cancelled`, in the order Redis took them, from the
//! queue's events stream (`queues:<name>:events`), for queues whose events are on
//! ([`RedisQueue::set_events`]).
//!
//! A stream, not pub/sub: a reader that reconnects goes on from the last entry it read, and
//! one that starts late can read what it missed, as far back as the stream is kept
//! (`XADD MAXLEN ~`). Every reader sees every entry (`XREAD`, no consumer group).

use futures_util::Stream;
use std::collections::VecDeque;
use std::time::Duration;

use crate::error::Result;
use crate::queue::RedisQueue;
use crate::status::signals::Signals;

/// How long one read waits for an entry.
const BLOCK: Duration = Duration::from_secs(1);

/// One event of a queue's stream.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueEvent {
    /// The stream entry's id (`<ms>-<n>`), to read on from. The events one call wrote for
    /// many jobs (a push's `queued`, a pop's `active`, an acknowledgement's `completed`)
    /// share one entry, and its id.
    pub id: String,
    /// `queued`, `active`, `progress`, `completed`, `failed`, `released`, `interrupted` (put
    /// back by a stopping worker, its attempt given back) or `cancelled`.
    pub event: String,
    /// The job's uuid.
    pub uuid: String,
    /// The job's name.
    pub job: String,
    /// The attempt (0 while queued).
    pub attempt: u32,
    /// What the event carries, as JSON when it is: the progress, the result of a tracked
    /// job, why it failed or was released.
    pub data: Option<serde_json::Value>,
}

impl QueueEvent {
    /// The events of one stream entry: one, or one per job of an entry that a call moving
    /// many jobs wrote (`n` jobs, uuids and attempts joined by spaces, names by newlines).
    fn from_entry(id: String, mut fields: std::collections::HashMap<String, String>) -> Vec<Self> {
        let event = fields.remove("event").unwrap_or_default();
        let uuid = fields.remove("uuid").unwrap_or_default();
        let job = fields.remove("job").unwrap_or_default();
        let attempt = fields.remove("attempt").unwrap_or_default();
        if fields.contains_key("n") {
            return uuid
                .split(' ')
                .zip(job.split('\n'))
                .zip(attempt.split(' '))
                .map(|((uuid, job), attempt)| QueueEvent {
                    id: id.clone(),
                    event: event.clone(),
                    uuid: uuid.to_owned(),
                    job: job.to_owned(),
                    attempt: attempt.parse().unwrap_or(0),
                    data: None,
                })
                .collect();
        }
        let data = fields.remove("data").filter(|d| !d.is_empty());
        vec![QueueEvent {
            id,
            event,
            uuid,
            job,
            attempt: attempt.parse().unwrap_or(0),
            data: data.map(|d| serde_json::from_str(&d).unwrap_or(serde_json::Value::String(d))),
        }]
    }
}

impl RedisQueue {
    /// The events of `queue` from now on, as they happen, on a connection of their own.
    ///
    /// ```no_run
    /// # async fn demo(queue: redjob::RedisQueue) -> redjob::Result<()> {
    /// use futures_util::StreamExt;
    /// queue.set_events("emails", Some(10_000)).await?;
    /// let mut events = std::pin::pin!(queue.events("emails").await?);
    /// while let Some(event) = events.next().await {
    ///     println!("{} {} {}", event.event, event.job, event.uuid);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn events(&self, queue: &str) -> Result<impl Stream<Item = QueueEvent> + Send> {
        let signals = Signals::after_newest(self, self.keys().events(queue)).await?;
        Ok(follow(signals))
    }

    /// The events of `queue` after the entry `id` (`"0-0"`: from the oldest still kept),
    /// then on as they happen.
    pub fn events_after(&self, queue: &str, id: &str) -> impl Stream<Item = QueueEvent> + Send {
        follow(Signals::after(self, self.keys().events(queue), id))
    }
}

fn follow(signals: Signals) -> impl Stream<Item = QueueEvent> + Send {
    futures_util::stream::unfold(
        (signals, VecDeque::new()),
        |(mut signals, mut read)| async move {
            loop {
                if let Some(event) = read.pop_front() {
                    return Some((event, (signals, read)));
                }
                read.extend(
                    signals
                        .next_entries(BLOCK)
                        .await
                        .into_iter()
                        .flat_map(|(id, fields)| QueueEvent::from_entry(id, fields)),
                );
            }
        },
    )
}
