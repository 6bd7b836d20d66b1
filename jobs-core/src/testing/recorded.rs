//! What a fake queue recorded: each job as it would have been pushed, and the chains and
//! batches dispatched.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::job::Job;
use crate::payload::delay::Delay;
use crate::payload::laravel::job_data;
use crate::payload::{php, Payload};
use crate::queue::{delay_from_due, Envelope};
use crate::workflow::Link;

/// One job as a fake queue recorded it: what a real queue would have pushed.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The job's uuid.
    pub uuid: Uuid,
    /// The job's registered name ([`Job::NAME`]).
    pub job: String,
    /// The queue it would have gone to.
    pub queue: String,
    /// Its delay, for a delayed job.
    pub delay: Option<Delay>,
    /// Its payload, as it would have been pushed (its tries, backoff, tags, ...).
    pub payload: Payload,
    /// What pushed it.
    pub origin: Origin,
}

/// What pushed a recorded job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A dispatch of the job, alone or in a [`Bulk`](crate::Bulk).
    Dispatch,
    /// A chain: the job is a link of the chain `id`. Only its first link is pushed at once;
    /// each later one when the link before it is done (see [`RecordedChain`]).
    Chain {
        /// The chain's id.
        id: Uuid,
    },
    /// The batch `id`, which pushed the job when it started or when a job was added to it.
    Batch {
        /// The batch's id.
        id: Uuid,
    },
    /// The schedule `name`, firing its tick `tick`.
    Schedule {
        /// The schedule's name.
        name: String,
        /// The tick it fired.
        tick: DateTime<Utc>,
    },
}

impl Recorded {
    /// The record of `envelope`, pushed by `origin`; `None` when its payload is not a job payload.
    pub fn from_envelope(envelope: &Envelope, origin: Origin) -> Option<Recorded> {
        Some(Recorded {
            uuid: envelope.uuid,
            job: envelope.job.to_string(),
            queue: envelope.queue.clone(),
            delay: envelope.delay,
            payload: Payload::from_json(&envelope.payload).ok()?,
            origin,
        })
    }

    pub(crate) fn from_link(link: &Link, origin: Origin) -> Option<Recorded> {
        Some(Recorded {
            uuid: link.uuid,
            job: link.job.clone(),
            queue: link.queue.clone(),
            delay: delay_from_due(&link.due),
            payload: Payload::from_json(&link.payload).ok()?,
            origin,
        })
    }

    /// Whether it is a job of type `J`.
    pub fn is<J: Job>(&self) -> bool {
        self.job == J::NAME
    }

    /// The job's value, when it is a job of type `J` whose data reads as one.
    pub fn decode<J: Job>(&self) -> Option<J> {
        if !self.is::<J>() {
            return None;
        }
        let data = self.payload.data.get();
        match J::options().laravel {
            // A Laravel job class travels as the class's serialized object.
            Some(_) => {
                #[derive(serde::Deserialize)]
                struct Command {
                    command: String,
                }
                let command: Command = serde_json::from_str(data).ok()?;
                let (_, properties) = php::unserialize_object(command.command.as_bytes()).ok()?;
                serde_json::from_value(properties).ok()
            }
            None => job_data(data).ok(),
        }
    }

    /// The job's data as JSON text, as a worker would read it.
    pub fn data(&self) -> &str {
        self.payload.data.get()
    }
}

impl std::fmt::Display for Recorded {
    /// One line: the job, its queue, its delay and its data (cut after 120 bytes).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {:?}", self.job, self.queue)?;
        match self.delay {
            Some(Delay::After(after)) => write!(f, ", delayed {after:?}")?,
            Some(Delay::At(at)) => write!(f, ", delayed until {at}")?,
            None => {}
        }
        match &self.origin {
            Origin::Dispatch => {}
            Origin::Chain { id } => write!(f, ", in chain {id}")?,
            Origin::Batch { id } => write!(f, ", in batch {id}")?,
            Origin::Schedule { name, tick } => write!(f, ", schedule {name:?} at {tick}")?,
        }
        let data = self.data();
        match data.char_indices().nth(120) {
            Some((cut, _)) => write!(f, ": {}...", &data[..cut]),
            None => write!(f, ": {data}"),
        }
    }
}

/// A chain as a fake queue recorded it: its links in the order they would run.
#[derive(Debug, Clone)]
pub struct RecordedChain {
    /// The chain's id: its first job's uuid.
    pub id: Uuid,
    /// Its links, in order.
    pub links: Vec<ChainLink>,
    /// Its catch job.
    pub catch: Option<Recorded>,
}

/// One link of a recorded chain.
// Records of a test, built once and read: the size of their variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ChainLink {
    /// A job.
    Job(Recorded),
    /// A batch whose jobs all run before the chain goes on.
    Batch(Box<RecordedBatch>),
}

impl RecordedChain {
    /// The registered names of its links' jobs, in order; a batch reads as `"batch"`.
    pub fn names(&self) -> Vec<&str> {
        self.links
            .iter()
            .map(|link| match link {
                ChainLink::Job(job) => job.job.as_str(),
                ChainLink::Batch(_) => "batch",
            })
            .collect()
    }

    /// The jobs among its links, in order (not those of its batches).
    pub fn jobs(&self) -> impl Iterator<Item = &Recorded> {
        self.links.iter().filter_map(|link| match link {
            ChainLink::Job(job) => Some(job),
            ChainLink::Batch(_) => None,
        })
    }
}

/// A batch as a fake queue recorded it.
#[derive(Debug, Clone)]
pub struct RecordedBatch {
    /// The batch's id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Whether it goes on after a job fails ([`Batch::allow_failures`](crate::Batch::allow_failures)).
    pub allow_failures: bool,
    /// Its jobs, in the order dispatched: each lone job, and each chain's first link. Jobs
    /// added to it later come last.
    pub jobs: Vec<Recorded>,
    /// Its chains (their first links are among [`RecordedBatch::jobs`]).
    pub chains: Vec<RecordedChain>,
    /// The job pushed when every job has succeeded.
    pub then: Option<Recorded>,
    /// The job pushed at the first failure.
    pub catch: Option<Recorded>,
    /// The job pushed when the batch finishes, either way.
    pub finally: Option<Recorded>,
    /// The chain this batch is a link of, whose earlier links run first.
    pub in_chain: Option<Uuid>,
}

impl RecordedBatch {
    /// The registered names of its jobs, in order.
    pub fn names(&self) -> Vec<&str> {
        self.jobs.iter().map(|job| job.job.as_str()).collect()
    }

    /// Whether it holds a job of type `J`.
    pub fn has<J: Job>(&self) -> bool {
        self.jobs.iter().any(Recorded::is::<J>)
    }

    /// How many of its jobs are of type `J`.
    pub fn count<J: Job>(&self) -> usize {
        self.jobs.iter().filter(|job| job.is::<J>()).count()
    }

    /// The chain of the batch that starts with `job`, if `job` is the first link of one.
    pub fn chain_of(&self, job: &Recorded) -> Option<&RecordedChain> {
        self.chains.iter().find(|chain| chain.id == job.uuid)
    }
}
