//! Operating the queues without the job types: failed jobs, queue sizes and contents, pause
//! and resume, restart, live workers and per-minute metrics, batches, outbox relays.
//!
//! Everything here works on raw payloads, so one tool serves any application. The `jobsctl`
//! command and its dashboard are built on [`Admin`]. It works on one Redis server and on a
//! Redis Cluster alike: there each step touches keys of one slot, and the one move between
//! slots, a retry from the failed-job store onto a queue, is made of steps that can each be
//! taken again (see [`Admin::retry`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), redjob::admin::AdminError> {
//! use redjob::admin::{Admin, FailedFilter, FailedSelection};
//! let admin = Admin::open("redis://127.0.0.1:6379")?;
//! let failed = admin.failed(&FailedFilter::default()).await?;
//! println!("{} failed jobs", failed.len());
//! let report = admin.retry(&FailedSelection::Queue("emails".into())).await?;
//! println!("{} pushed back", report.retried.len());
//! println!("{:?}", admin.queue_stats("emails").await?);
//! # Ok(()) }
//! ```

mod batches;
mod cursor;
mod error;
mod failed;
mod outbox;
mod queues;
mod retry;
mod schedules;
pub(crate) mod telemetry;
mod unique;
pub(crate) mod unrunnable;
mod waits;
mod workers;

pub use batches::{BatchDetail, BatchFilter, BatchPage, BatchState, PendingBatches};
pub use error::{AdminError, InvalidWait};
pub use failed::{
    FailedEntry, FailedFilter, FailedPage, FailedSelection, Retried, RetryReport, FAILED_PAGE,
    FAILED_PAGE_MAX,
};
pub use outbox::{OutboxReport, OutboxStatus, RelayInfo, RELAY_REPORT_EVERY, RELAY_TTL};
pub use queues::{QueueStats, QueuedJob, Section, UnknownSection};
pub use schedules::{ScheduleInfo, STALE_AFTER};
pub use telemetry::{
    AttemptOutcome, Bucket, OutcomeCounts, RecentJob, RunningJob, WorkerInfo,
    DEFAULT_METRICS_RETENTION, RECENT_LIMIT, RUNNING_LISTED,
};
pub use unique::{HeldLock, UniqueFilter, UniquePage};
pub use unrunnable::{UnrunnableJobs, UNRUNNABLE_SEEN_WITHIN};
pub use waits::WaitThreshold;
pub use workers::{MinuteMetrics, RecentFilter, RecentPage};

use chrono::{DateTime, TimeZone, Utc};
use std::time::Duration;

use crate::payload::RawFields;
use crate::queue::RedisQueue;

/// Most script calls or keys sent in one pipeline.
const CHUNK: usize = 500;

/// How long one page of a searched listing (failed jobs, batches, unique locks) searches, unless
/// [`Admin::with_page_budget`] says otherwise, before it returns what it found with a cursor
/// to go on from: short enough for a dashboard that refreshes every few seconds.
pub const PAGE_BUDGET: Duration = Duration::from_millis(30);

/// Operations on the queues of one Redis server or of a Redis Cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    queue: RedisQueue,
    page_budget: Duration,
}

impl Admin {
    /// Operations through an existing handle.
    pub fn new(queue: RedisQueue) -> Self {
        Admin {
            queue,
            page_budget: PAGE_BUDGET,
        }
    }

    /// How long one page of a searched listing ([`Admin::failed_page`],
    /// [`Admin::batches_page`], [`Admin::unique_locks_page`]) may search, in steps, before it
    /// returns what it found with a cursor ([`PAGE_BUDGET`] unless set). A page always takes
    /// at least one step, so even a zero budget makes progress; a page may then be empty and
    /// still have a cursor. `jobsctl` gives a person at a terminal one second, the dashboard
    /// keeps the default.
    pub fn with_page_budget(mut self, budget: Duration) -> Self {
        self.page_budget = budget;
        self
    }

    /// Operations on the Redis at `url`. Call it inside a Tokio runtime.
    pub fn open(url: &str) -> Result<Self, AdminError> {
        Ok(Admin::new(RedisQueue::open(url)?))
    }

    /// The handle these operations use.
    pub fn queue(&self) -> &RedisQueue {
        &self.queue
    }
}

/// What a listing shows of a raw payload, read leniently: any field may be missing.
struct Summary {
    job: Option<String>,
    display_name: Option<String>,
    uuid: Option<String>,
    attempts: Option<u64>,
    tags: Vec<String>,
}

impl Summary {
    fn of(raw: &str) -> Summary {
        let fields = RawFields::parse(raw);
        Summary {
            job: fields.text("job"),
            display_name: fields.text("displayName"),
            uuid: fields.text("uuid"),
            attempts: fields.number("attempts"),
            tags: fields.texts("tags"),
        }
    }
}

/// A score (seconds since the epoch, with a fraction) as a time.
fn time_of_score(score: f64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt((score * 1000.0).round() as i64)
        .single()
}
