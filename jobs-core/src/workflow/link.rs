//! Links: jobs built and signed ahead of time and kept in Redis until a script pushes them (a
//! chain's next links and its catch job).
//!
//! A link is stored as one string: a line of JSON saying where the job goes
//! (`["queue","due","uuid","job"]`, `due` as `later.lua` takes it or `""` for a ready job, and
//! the job's group fifth when it has one), a newline, then the payload byte for byte. The
//! worker reads the line to name the keys of the script call that pushes the link; the script
//! reads it only for the group, whose rotation the job joins, and pushes what follows the
//! newline without decoding it.

use uuid::Uuid;

use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::{due_arg, Envelope, RedisQueue};

/// A job kept in Redis until a script pushes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The queue it goes to.
    pub queue: String,
    /// When it is due once pushed: `""` for at once, else a delay from the push or a point in
    /// time, as `later.lua` reads them.
    pub due: String,
    /// The job's uuid.
    pub uuid: Uuid,
    /// The job's registered name.
    pub job: String,
    /// The group of its queue it waits in, when it has one ([fair groups](crate::groups)).
    pub group: Option<String>,
    /// The payload, signed if the dispatching handle signs.
    pub payload: String,
}

/// A link's header as stored: four fields, and the group fifth when the job has one.
#[derive(serde::Deserialize)]
struct Header(
    String,
    String,
    Uuid,
    String,
    #[serde(default)] Option<String>,
);

/// A link as stored, decoded, and the keys of the queue it goes to.
pub(crate) type StoredLink = (String, Link, QueueKeys);

/// The job name of the entry a chain keeps for a batch that is one of its links: not a job,
/// but where the batch starts (its queue is empty, which no job's is).
const BATCH_START: &str = "jobs:batch-start";

impl Link {
    /// The entry a chain keeps for the batch `batch`, one of its links.
    pub(crate) fn batch_start(batch: Uuid) -> Link {
        Link {
            queue: String::new(),
            due: String::new(),
            uuid: batch,
            job: BATCH_START.to_owned(),
            group: None,
            payload: String::new(),
        }
    }

    /// The batch this entry starts, when it is a chain's batch rather than a job.
    pub fn starts_batch(&self) -> Option<Uuid> {
        (self.queue.is_empty() && self.job == BATCH_START).then_some(self.uuid)
    }

    /// The link that pushes `envelope`, sealed by `queue` (signed if it signs, and checked).
    pub(crate) fn sealed(queue: &RedisQueue, envelope: Envelope) -> Result<Link> {
        Ok(Link::from_envelope(queue.seal_one(envelope)?))
    }

    /// Links that push `envelopes`, each sealed by `queue`.
    pub(crate) fn sealed_all(queue: &RedisQueue, envelopes: Vec<Envelope>) -> Result<Vec<Link>> {
        envelopes
            .into_iter()
            .map(|envelope| Link::sealed(queue, envelope))
            .collect()
    }

    /// The key the link is pushed to, given its queue's keys: the ready list of its queue, or
    /// of its group when it has one, or that one's delayed set when it is due later.
    pub(crate) fn destination(&self, keys: &QueueKeys) -> String {
        let grouped;
        let keys = match &self.group {
            Some(group) => {
                grouped = keys.for_group(group);
                &grouped
            }
            None => keys,
        };
        match self.due.is_empty() {
            true => keys.ready.clone(),
            false => keys.delayed.clone(),
        }
    }

    /// The link as stored, with itself and the keys of its queue.
    pub(crate) fn stored(&self, queue: &RedisQueue) -> StoredLink {
        (self.encode(), self.clone(), queue.queue_keys(&self.queue))
    }

    /// The link that pushes `envelope` (already signed, if it is to be).
    pub fn from_envelope(envelope: Envelope) -> Link {
        Link {
            due: envelope.delay.map_or(String::new(), |d| due_arg(Some(d))),
            queue: envelope.queue,
            uuid: envelope.uuid,
            job: envelope.job.to_string(),
            group: envelope.group,
            payload: envelope.payload,
        }
    }

    /// The link as stored in Redis.
    ///
    /// ```
    /// use redjob::workflow::Link;
    /// let link = Link {
    ///     queue: "mail".into(),
    ///     due: "30.000".into(),
    ///     uuid: uuid::Uuid::nil(),
    ///     job: "Notify".into(),
    ///     group: None,
    ///     payload: r#"{"job":"Notify"}"#.into(),
    /// };
    /// let stored = link.encode();
    /// assert_eq!(
    ///     stored,
    ///     "[\"mail\",\"30.000\",\"00000000-0000-0000-0000-000000000000\",\"Notify\"]\n{\"job\":\"Notify\"}"
    /// );
    /// assert_eq!(Link::decode(&stored), Some(link.clone()));
    /// // A job of a group has its group fifth.
    /// let grouped = Link { group: Some("tenant-42".into()), ..link };
    /// assert!(grouped.encode().starts_with("[\"mail\",\"30.000\",\"00000000-0000-0000-0000-000000000000\",\"Notify\",\"tenant-42\"]\n"));
    /// assert_eq!(Link::decode(&grouped.encode()), Some(grouped));
    /// ```
    pub fn encode(&self) -> String {
        let mut stored = match &self.group {
            None => serde_json::to_string(&(&self.queue, &self.due, &self.uuid, &self.job)),
            Some(group) => {
                serde_json::to_string(&(&self.queue, &self.due, &self.uuid, &self.job, group))
            }
        }
        .expect("a link's header serializes");
        stored.push('\n');
        stored.push_str(&self.payload);
        stored
    }

    /// A link as stored in Redis, or `None` when `stored` is not one.
    pub fn decode(stored: &str) -> Option<Link> {
        let (header, payload) = stored.split_once('\n')?;
        let Header(queue, due, uuid, job, group) = serde_json::from_str(header).ok()?;
        Some(Link {
            queue,
            due,
            uuid,
            job,
            group,
            payload: payload.to_owned(),
        })
    }
}
