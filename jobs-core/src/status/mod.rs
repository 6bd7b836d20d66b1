//! Watching and stopping jobs: a job's status and progress, its result, waiting for its
//! outcome, and cancelling it.
//!
//! A **tracked** job (`#[job(track)]` on its type, or [`PendingDispatch::track`] on one
//! dispatch) keeps a status record in Redis (`jobs:status:<uuid>`): its state (queued,
//! delayed, running, released, done, failed, cancelled), its attempt, the worker running it,
//! the last progress it reported ([`JobContext::progress`]), and once it settles its result
//! (the handler's [`Job::Output`], serialized) or its error. The record is written by the
//! script calls that push, start and settle the job, the final state in the very call that
//! acknowledges it, so a reader never sees a job done without its result. It lasts a day
//! while the job is open and `result_ttl` seconds (default [`DEFAULT_RESULT_TTL`]) after it
//! settles for good. Untracked jobs keep no record and cost nothing more.
//!
//! - [`RedisQueue::status`] reads a job's [`JobStatus`] (`jobsctl status UUID`);
//! - [`RedisQueue::wait`] and [`Tracked::wait`] wait for its outcome, woken by the
//!   `jobs:settled` stream the settling call appends to, not by polling;
//! - [`RedisQueue::cancel`] stops any job, tracked or not, from any process
//!   (`jobsctl cancel UUID`): a waiting one is settled as cancelled without running when a
//!   worker reaches it, a running one sees [`JobContext::cancelled`] fire within milliseconds.
//!
//! A queue's **events** (`queued`, `active`, `progress`, `completed`, `failed`, `released`,
//! `cancelled`), for every job of the queue, tracked or not, are off until an operator turns
//! them on for that queue ([`RedisQueue::set_events`], `jobsctl events QUEUE --on`); then the
//! same script calls append them to the queue's capped stream, which any process reads live
//! with [`RedisQueue::events`] (`jobsctl events QUEUE`). Off, they cost nothing but a read of
//! the switch once a second per process.
//!
//! [`PendingDispatch::track`]: crate::PendingDispatch::track
//! [`JobContext::progress`]: crate::JobContext::progress
//! [`JobContext::cancelled`]: crate::JobContext::cancelled
//! [`Job::Output`]: crate::Job::Output
//! [`RedisQueue::status`]: crate::RedisQueue::status
//! [`RedisQueue::wait`]: crate::RedisQueue::wait
//! [`RedisQueue::cancel`]: crate::RedisQueue::cancel
//! [`RedisQueue::set_events`]: crate::RedisQueue::set_events
//! [`RedisQueue::events`]: crate::RedisQueue::events

mod cancel;
mod events;
mod hook;
mod progress;
mod record;
mod signals;
mod step;
mod tracked;
mod wait;

pub use cancel::Cancelled;
pub use events::QueueEvent;
pub use record::{JobState, JobStatus};
pub use signals::Signals;
pub use tracked::{Tracked, TrackedDispatch};
pub use wait::WaitError;

use std::time::Duration;

/// Seconds a tracked job's outcome is kept after it settles, unless its type says
/// `result_ttl = N`: an hour.
pub const DEFAULT_RESULT_TTL: u64 = 3600;

/// The largest result kept, in bytes of JSON: a larger one is not kept, and the record says
/// so in its `error`. Results live in Redis's memory for their whole TTL.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// How long a cancel request is kept for a job no worker has reached: a week. A job that
/// waits longer runs when it is reached.
pub const CANCEL_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The reason a cancelled job fails with: in its failed-job record, its status and its
/// `failed()` hook's context.
pub const CANCELLED: &str = "cancelled";
