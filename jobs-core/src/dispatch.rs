//! Dispatching: from a job value to a payload in Redis.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::job::{Job, JobOptions};
use crate::payload::backoff::Backoff;
use crate::payload::delay::Delay;
use crate::payload::laravel::CALL_QUEUED_HANDLER;
use crate::payload::php;
use crate::payload::unique::{Dispatched, UniqueLock};
use crate::payload::{LogContext, Payload};
use crate::queue::durability::Durability;
use crate::queue::keys::check_group_name;
use crate::queue::{DebounceDispatch, Envelope, RedisQueue, UniqueDispatch};
use crate::trace;
use tracing::Instrument;

/// Ten years, in seconds: as good as forever. A debounced job's `max_wait` when it sets none,
/// and the longest a unique lock lasts (Redis refuses an expiry past what its clock can add,
/// so a longer `unique_for` is held for this long).
const TEN_YEARS: u64 = 10 * 365 * 86_400;

/// The queue a job goes to when neither it nor its dispatch names one.
pub const DEFAULT_QUEUE: &str = "default";

/// A dispatch being prepared; await it to push the job and get its uuid.
///
/// ```no_run
/// # use redjob::{job, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct SendInvoice { id: u64 }
/// # #[job] impl Job for SendInvoice { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # async fn demo() -> Result<(), redjob::Error> {
/// let uuid = SendInvoice { id: 7 }.dispatch().delay(30).on_queue("billing").tries(5).await?;
/// # Ok(()) }
/// ```
#[must_use = "a dispatch does nothing until it is awaited"]
pub struct PendingDispatch<J: Job> {
    job: J,
    delay: Option<Delay>,
    queue: Option<String>,
    tries: Option<u32>,
    backoff: Option<Backoff>,
    timeout: Option<u64>,
    retry_until: Option<chrono::DateTime<chrono::Utc>>,
    max_exceptions: Option<u32>,
    through: Vec<String>,
    tags: Vec<String>,
    log_context: Option<LogContext>,
    via: Option<RedisQueue>,
    pub(crate) track: Option<u64>,
    group: Option<String>,
    durability: Option<Durability>,
}

impl<J: Job> PendingDispatch<J> {
    /// A dispatch of `job` with its type's options.
    pub fn new(job: J) -> Self {
        PendingDispatch {
            job,
            delay: None,
            queue: None,
            tries: None,
            backoff: None,
            timeout: None,
            retry_until: None,
            max_exceptions: None,
            through: Vec::new(),
            tags: Vec::new(),
            log_context: None,
            via: None,
            track: None,
            group: None,
            durability: None,
        }
    }

    /// Runs the job no earlier than after this delay: seconds, a `Duration`, or a
    /// `chrono::DateTime<Utc>`.
    pub fn delay(mut self, delay: impl Into<Delay>) -> Self {
        self.delay = Some(delay.into());
        self
    }

    /// Pushes to this queue instead of the job's own.
    pub fn on_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Allows this many attempts (0: unlimited).
    pub fn tries(mut self, tries: u32) -> Self {
        self.tries = Some(tries);
        self
    }

    /// Waits this long before each retry: seconds, or a list of seconds.
    pub fn backoff(mut self, backoff: impl Into<Backoff>) -> Self {
        self.backoff = Some(backoff.into());
        self
    }

    /// Lets the handler run this many seconds before it is stopped as timed out.
    pub fn timeout(mut self, seconds: u64) -> Self {
        self.timeout = Some(seconds);
        self
    }

    /// Retries the job until this time instead of a number of tries (Laravel's `retryUntil`):
    /// tries are not counted while it is set; an attempt that fails after it, or a job
    /// reserved after it, fails the job.
    pub fn retry_until(mut self, until: chrono::DateTime<chrono::Utc>) -> Self {
        self.retry_until = Some(until);
        self
    }

    /// Fails the job once this many of its attempts have ended in an error, a panic or a
    /// timeout, however many tries it has left (releases do not count).
    pub fn max_exceptions(mut self, exceptions: u32) -> Self {
        self.max_exceptions = Some(exceptions);
        self
    }

    /// Runs the job through the middleware defined as `name`
    /// ([`middleware::define`](crate::middleware::define)) in the worker, inside the job type's
    /// own. A worker that has no middleware by that name fails the job, saying so.
    pub fn through(mut self, name: impl Into<String>) -> Self {
        self.through.push(name.into());
        self
    }

    /// Acknowledges the dispatch only once `durability.replicas` replicas have the job, instead
    /// of as the handle's default says ([`QueueConfig::durability`](crate::QueueConfig::durability)):
    /// a failover that follows cannot lose it. When fewer replicas confirm within
    /// `durability.timeout`, the dispatch fails with [`Error::NotDurable`]: the job was pushed,
    /// and may or may not survive a failover. [`Durability::NONE`] makes a dispatch through a
    /// durable handle an ordinary one.
    ///
    /// ```no_run
    /// # use redjob::{job, Job, JobContext, JobResult};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct SendInvoice { id: u64 }
    /// # #[job] impl Job for SendInvoice { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # async fn demo() -> Result<(), redjob::Error> {
    /// use redjob::Durability;
    /// let uuid = SendInvoice { id: 7 }.dispatch().durable(Durability::replicas(1)).await?;
    /// # Ok(()) }
    /// ```
    pub fn durable(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Adds a tag to the job's own ([`Job::tags`]).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sends Laravel's Context with the job (the payload's `illuminate:log:context`): a
    /// Laravel 11+ worker hydrates it as its `Context` before the job runs, and a Rust handler
    /// reads it with [`JobContext::log_context`](crate::JobContext::log_context). An empty
    /// context is not written.
    ///
    /// ```no_run
    /// # use redjob::{job, Job, JobContext, JobResult, payload::LogContext};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct SendInvoice { id: u64 }
    /// # #[job] impl Job for SendInvoice { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # async fn demo() -> Result<(), redjob::Error> {
    /// let context = LogContext::new().with("tenant", "acme").with("request_id", "r-42");
    /// SendInvoice { id: 7 }.dispatch().log_context(context).await?;
    /// # Ok(()) }
    /// ```
    pub fn log_context(mut self, context: LogContext) -> Self {
        self.log_context = (!context.is_empty()).then_some(context);
        self
    }

    /// Puts the job in this group of its queue, instead of the job's own
    /// ([`Job::group`]): the queue serves its groups in turn, each within its limits
    /// ([fair groups](crate::groups)). A name is at most 128 bytes, without `:`, braces,
    /// commas or white space ([`check_group_name`]); the dispatch fails otherwise.
    ///
    /// ```no_run
    /// # use redjob::{job, Job, JobContext, JobResult};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ImportRow { tenant: u64, row: u64 }
    /// # #[job] impl Job for ImportRow { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
    /// # async fn demo() -> Result<(), redjob::Error> {
    /// ImportRow { tenant: 42, row: 1 }.dispatch().group("tenant-42").await?;
    /// # Ok(()) }
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Pushes through this handle instead of the process-wide default.
    pub fn via(mut self, queue: &RedisQueue) -> Self {
        self.via = Some(queue.clone());
        self
    }

    /// The payload this dispatch will push, with its queue and delay.
    pub fn envelope(&self) -> Result<Envelope> {
        self.envelope_in(&Placement::default())
    }

    /// The payload this dispatch pushes as a job of a workflow: a link of a chain, a job of a
    /// batch.
    pub(crate) fn envelope_in(&self, placement: &Placement) -> Result<Envelope> {
        let options = J::options();
        check_placement::<J>(&options, placement)?;
        let uuid = placement.uuid.unwrap_or_else(Uuid::new_v4);
        let (job, display_name, data) = self.job_data(&options)?;
        let unique = self.unique_dispatch(&options);
        let debounce = self.debounce_dispatch(&options);
        // A debounced job's delay is its debounce window's.
        let delay = match &debounce {
            Some(debounce) => Some(Delay::After(debounce.wait)),
            None => self.delay.or(placement.delay),
        };
        let rules = self.rules(&options);
        let group = self.group_name()?;
        let mut payload = Payload {
            uuid,
            display_name: display_name.to_owned(),
            job: job.to_owned(),
            max_tries: rules.max_tries,
            max_exceptions: rules.max_exceptions,
            fail_on_timeout: options.fail_on_timeout,
            backoff: rules.backoff,
            timeout: rules.timeout,
            retry_until: rules.retry_until,
            data,
            created_at: Some(rules.created_at),
            unique: unique.as_ref().map(|u| u.lock.clone()),
            through: self.through.clone(),
            tags: rules.tags,
            chain: placement.chain,
            batch: placement.batch,
            callback_of: placement.callback_of,
            track: self.track.or(options.track),
            group: group.clone(),
            traceparent: None,
            tracestate: None,
            log_context: self.log_context.clone(),
            id: uuid.simple().to_string(),
            signature: None,
            exceptions: 0,
            requeues: 0,
            interruptions: 0,
            unrunnable_since: 0,
            attempts: 0,
            delay: delay.map(|d| delay_seconds(d.duration_from_now())),
        };
        if !placement.untraced {
            trace::stamp(&mut payload);
        }
        Ok(Envelope {
            uuid,
            job: J::NAME.into(),
            queue: self.queue_name(&options, placement).to_owned(),
            payload: payload.to_json(),
            delay,
            unique,
            debounce,
            track: payload.track,
            group,
        })
    }

    /// The group the job waits in: the dispatch's, else the job's own ([`Job::group`]),
    /// checked ([`check_group_name`]).
    fn group_name(&self) -> Result<Option<String>> {
        let group = self.group.clone().or_else(|| self.job.group());
        if let Some(group) = &group {
            check_group_name(group)?;
        }
        Ok(group)
    }

    /// The queue the job goes to: the dispatch's, else the job type's, else its workflow's,
    /// else [`DEFAULT_QUEUE`].
    fn queue_name<'a>(&'a self, options: &JobOptions, placement: &'a Placement) -> &'a str {
        self.queue
            .as_deref()
            .or(options.queue)
            .or(placement.queue.as_deref())
            .unwrap_or(DEFAULT_QUEUE)
    }

    /// The payload's `job`, `displayName` and `data`: a job declared for a Laravel class
    /// travels as that class's object, as Laravel queues it, so either side's workers can run
    /// it.
    fn job_data(
        &self,
        options: &JobOptions,
    ) -> Result<(&'static str, &'static str, Box<serde_json::value::RawValue>)> {
        let serialize_error = |source| Error::Serialize {
            job: J::NAME,
            source,
        };
        match options.laravel {
            Some(class) => {
                let properties = serde_json::to_value(&self.job).map_err(serialize_error)?;
                let command = serde_json::json!({
                    "commandName": class,
                    "command": php::serialize_object(class, &properties),
                });
                let data = serde_json::value::to_raw_value(&command).map_err(serialize_error)?;
                let display_name = options.display_name.unwrap_or(class);
                Ok((CALL_QUEUED_HANDLER, display_name, data))
            }
            None => {
                let data = serde_json::value::to_raw_value(&self.job).map_err(serialize_error)?;
                Ok((J::NAME, options.display_name.unwrap_or(J::NAME), data))
            }
        }
    }

    /// The lock a unique job's push takes.
    fn unique_dispatch(&self, options: &JobOptions) -> Option<UniqueDispatch> {
        let seconds = options.unique_for?.clamp(1, TEN_YEARS);
        let unique_id = self.job.unique_id();
        Some(UniqueDispatch {
            lock: UniqueLock {
                key: format!("{}:{unique_id}", J::NAME),
                until: options.unique_until,
                lasts: seconds,
            },
            unique_id,
            lasts: Duration::from_secs(seconds),
        })
    }

    /// The debounce window of a debounced job.
    fn debounce_dispatch(&self, options: &JobOptions) -> Option<DebounceDispatch> {
        let seconds = options.debounce?;
        Some(DebounceDispatch {
            key: format!("{}:{}", J::NAME, self.job.debounce_id()),
            wait: Duration::from_secs(seconds),
            max_wait: Duration::from_secs(options.max_wait.unwrap_or(TEN_YEARS).max(seconds)),
        })
    }

    /// The payload's attempt rules and tags: the dispatch's settings over the job type's.
    fn rules(&self, options: &JobOptions) -> Rules {
        let created_at = chrono::Utc::now().timestamp();
        Rules {
            max_tries: self.tries.or(options.tries),
            max_exceptions: self.max_exceptions.or(options.max_exceptions),
            backoff: self
                .backoff
                .clone()
                .or_else(|| options.backoff())
                .map(|b| b.to_string()),
            timeout: self.timeout.or(options.timeout),
            retry_until: self
                .retry_until
                .map(|until| until.timestamp())
                .or_else(|| Some(created_at + i64::try_from(options.retry_for?).ok()?)),
            created_at,
            tags: self
                .job
                .tags()
                .into_iter()
                .chain(self.tags.iter().cloned())
                .collect(),
        }
    }

    /// The handle this dispatch goes through, and the payload it pushes.
    pub(crate) fn prepare(self) -> Result<(RedisQueue, Envelope)> {
        let envelope = self.envelope()?;
        Ok((RedisQueue::given_or_default(self.via)?, envelope))
    }

    /// Pushes the job, in a `send` span ([`trace`]) that its payload names as its trace
    /// parent; returns its uuid.
    fn send(self) -> impl Future<Output = Result<Uuid>> + Send + 'static {
        let sent = self.send_through();
        async move { Ok(sent.await?.0) }
    }

    /// Pushes the job as [`send`](Self::send) does; returns its uuid and the handle it went
    /// through.
    pub(crate) fn send_through(
        self,
    ) -> impl Future<Output = Result<(Uuid, RedisQueue)>> + Send + 'static {
        let operation = if self.delay.is_some() {
            "later"
        } else {
            "push"
        };
        let placement = Placement::default();
        let span = trace::send_span(|| self.queue_name(&J::options(), &placement), operation, 1);
        let durability = self.durability;
        let prepared = span.in_scope(|| self.prepare());
        let push = async move {
            let (queue, envelope) = prepared?;
            let durability = durability.unwrap_or(queue.config().durability);
            let pushed = queue
                .push_durably(std::slice::from_ref(&envelope), durability)
                .await?;
            match pushed.into_iter().next() {
                Some(Dispatched::Duplicate(duplicate)) => Err(Error::Duplicate(duplicate)),
                _ => Ok((envelope.uuid, queue)),
            }
        };
        push.instrument(span)
    }
}

/// A payload's attempt rules and tags, as a dispatch writes them.
struct Rules {
    max_tries: Option<u32>,
    max_exceptions: Option<u32>,
    backoff: Option<String>,
    timeout: Option<u64>,
    retry_until: Option<i64>,
    created_at: i64,
    tags: Vec<String>,
}

/// Refuses a unique or debounced job as a job of a workflow.
fn check_placement<J: Job>(options: &JobOptions, placement: &Placement) -> Result<()> {
    if placement.chain.is_none() && placement.batch.is_none() {
        return Ok(());
    }
    let kind = match (options.unique_for, options.debounce) {
        (Some(_), _) => "unique",
        (None, Some(_)) => "debounced",
        (None, None) => return Ok(()),
    };
    Err(Error::NotInWorkflow { job: J::NAME, kind })
}

/// Where a dispatch goes in a workflow: what its payload carries besides the job, and what it
/// falls back on when neither the dispatch nor its job type says.
#[derive(Debug, Clone, Default)]
pub(crate) struct Placement {
    /// The uuid to give the job (a chain's first job, whose uuid is the chain's id).
    pub(crate) uuid: Option<Uuid>,
    /// The chain the job is a link of.
    pub(crate) chain: Option<Uuid>,
    /// The batch the job belongs to.
    pub(crate) batch: Option<Uuid>,
    /// The queue of a job that names none.
    pub(crate) queue: Option<String>,
    /// The delay of a job dispatched without one.
    pub(crate) delay: Option<Delay>,
    /// A job no request caused (a schedule's tick): it carries no trace context, whatever span
    /// it is built in, and each of its runs starts a trace of its own.
    pub(crate) untraced: bool,
    /// The batch the job is a callback of.
    pub(crate) callback_of: Option<Uuid>,
}

/// A dispatch of any job type, for the workflows that hold dispatches of many types.
pub(crate) trait AnyDispatch: Send + 'static {
    /// The payload the dispatch pushes at `placement`.
    fn envelope_in(&self, placement: &Placement) -> Result<Envelope>;
}

impl<J: Job> AnyDispatch for PendingDispatch<J> {
    fn envelope_in(&self, placement: &Placement) -> Result<Envelope> {
        PendingDispatch::envelope_in(self, placement)
    }
}

impl<J: Job> IntoFuture for PendingDispatch<J> {
    type Output = Result<Uuid>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Uuid>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

/// Many dispatches, of any job types, pushed in one round trip.
///
/// ```no_run
/// # use redjob::{job, Bulk, Job, JobContext, JobResult};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct SendInvoice { id: u64 }
/// # #[job] impl Job for SendInvoice { async fn handle(&self, _: &JobContext) -> JobResult { Ok(()) } }
/// # async fn demo() -> Result<(), redjob::Error> {
/// let mut bulk = Bulk::new();
/// for id in 0..1000 {
///     bulk.add(SendInvoice { id }.dispatch())?;
/// }
/// bulk.add(SendInvoice { id: 1000 }.dispatch().delay(60))?;
/// let sent = bulk.send().await?;
/// assert_eq!(sent.len(), 1001);
/// let uuids: Vec<_> = sent.iter().map(|s| s.uuid()).collect();
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct Bulk {
    envelopes: Vec<Envelope>,
    via: Option<RedisQueue>,
    durability: Option<Durability>,
}

impl Bulk {
    /// An empty bulk dispatch through the process-wide default handle.
    pub fn new() -> Self {
        Bulk::default()
    }

    /// An empty bulk dispatch through `queue`.
    pub fn via(queue: &RedisQueue) -> Self {
        Bulk {
            via: Some(queue.clone()),
            ..Bulk::default()
        }
    }

    /// Acknowledges the whole bulk only once `durability.replicas` replicas have every job of
    /// it (one `WAIT`), as [`PendingDispatch::durable`] does for one dispatch; the durability
    /// of the dispatches added is not looked at.
    pub fn durable(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Adds a dispatch (its payload is built now).
    pub fn add<J: Job>(&mut self, dispatch: PendingDispatch<J>) -> Result<&mut Self> {
        self.envelopes.push(dispatch.envelope()?);
        Ok(self)
    }

    /// How many dispatches were added.
    pub fn len(&self) -> usize {
        self.envelopes.len()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.envelopes.is_empty()
    }

    /// Pushes everything; returns what became of each dispatch, in the order added: queued
    /// with its uuid, or refused as a [`Duplicate`](crate::Duplicate) of a unique job already queued or running.
    ///
    /// The push runs in one `send` span ([`trace`]); each job's trace parent is the span
    /// current when it was added.
    pub async fn send(self) -> Result<Vec<Dispatched>> {
        let durability = self.durability;
        let (queue, envelopes) = self.prepare()?;
        let destination = || match envelopes.split_first() {
            Some((first, rest)) if rest.iter().all(|e| e.queue == first.queue) => &first.queue,
            _ => "*",
        };
        let span = trace::send_span(destination, "bulk", envelopes.len());
        let durability = durability.unwrap_or(queue.config().durability);
        queue
            .push_durably(&envelopes, durability)
            .instrument(span)
            .await
    }

    /// The handle these dispatches go through, and the payloads they push.
    pub(crate) fn prepare(self) -> Result<(RedisQueue, Vec<Envelope>)> {
        Ok((RedisQueue::given_or_default(self.via)?, self.envelopes))
    }
}

fn delay_seconds(delay: Duration) -> serde_json::Number {
    if delay.subsec_millis() == 0 {
        delay.as_secs().into()
    } else {
        serde_json::Number::from_f64(delay.as_secs_f64()).unwrap_or_else(|| delay.as_secs().into())
    }
}
