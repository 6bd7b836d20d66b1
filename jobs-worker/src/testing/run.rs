//! Running a job synchronously, through the path a worker's attempt takes.

use redjob::__worker::{take_batch_added, take_chain_edits, AttemptSetup, WorkerQueue};
use redjob::middleware::Layer;
use redjob::payload::counters::{self, counters};
use redjob::payload::with_attempts;
use redjob::queue::hold::Holds;
use redjob::queue::Envelope;
use redjob::testing::{Fake, Origin, Recorded};
use redjob::{FailedContext, Job, PendingDispatch, QueueConfig, RedisQueue, State};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{warn, Instrument};

use crate::config::WorkerConfig;
use crate::runtime::decode::{decode_payload, PayloadCopy};
use crate::runtime::execute::{self, attempt_span, Surroundings};
use crate::runtime::hooks;
use crate::runtime::rules::Verdict;
use crate::runtime::startup::GivenState;

/// How many attempts [`Run::to_end`] makes at most, by default: Sidekiq's retry count.
pub const MAX_ATTEMPTS: usize = 25;

/// A synchronous run of a job being prepared: await it for one attempt, or call
/// [`Run::to_end`] for every attempt until the job is done or failed.
///
/// The attempt takes the worker's path: the attempt rules (tries, `retry_until`), the
/// worker's middleware then the job's and the dispatch's, the timeout, panics caught, the
/// release, retry and fail verdicts with the job's backoff, and the `failed()` hook of a job
/// that failed for good. Backoffs are reported, not waited.
#[must_use = "a run does nothing until it is awaited"]
pub struct Run {
    /// The payload as pushed, or why the dispatch could not build one.
    payload: Result<String, String>,
    queue: String,
    config: WorkerConfig,
    middleware: Vec<Layer>,
    redis: Option<RedisQueue>,
    state: GivenState,
    attempt: u32,
    max_attempts: usize,
    /// The checkpoint the first attempt starts from (JSON).
    checkpoint: Option<String>,
}

/// A synchronous run of `job`, with its type's options.
pub fn run<J: Job>(job: J) -> Run {
    Run::dispatch(PendingDispatch::new(job))
}

impl Run {
    /// A synchronous run of the job `dispatch` would push, with its options (tries, backoff,
    /// timeout, middleware by name, queue).
    pub fn dispatch<J: Job>(dispatch: PendingDispatch<J>) -> Run {
        match dispatch.envelope() {
            Ok(envelope) => Run::payload(envelope.queue, envelope.payload),
            Err(err) => Run {
                payload: Err(err.to_string()),
                ..Run::payload(String::new(), String::new())
            },
        }
    }

    /// A synchronous run of a job a fake queue recorded.
    pub fn recorded(job: &Recorded) -> Run {
        Run::payload(job.queue.clone(), job.payload.to_json())
    }

    fn payload(queue: String, payload: String) -> Run {
        Run {
            payload: Ok(payload),
            queue,
            config: WorkerConfig::default(),
            middleware: Vec::new(),
            redis: None,
            state: GivenState::default(),
            attempt: 1,
            max_attempts: MAX_ATTEMPTS,
            checkpoint: None,
        }
    }

    /// Starts the run from `checkpoint`, as an attempt of a resumable job after an earlier one
    /// saved it ([`JobContext::checkpoint`](redjob::JobContext::checkpoint)). A value that
    /// does not serialize fails the run's attempts, saying so.
    pub fn from_checkpoint<T: serde::Serialize + ?Sized>(mut self, checkpoint: &T) -> Run {
        match serde_json::to_string(checkpoint) {
            Ok(json) => self.checkpoint = Some(json),
            Err(err) => self.payload = Err(format!("the checkpoint does not serialize: {err}")),
        }
        self
    }

    /// Runs it as its `attempt`th attempt (default 1): to see what its last try does.
    pub fn attempt(mut self, attempt: u32) -> Run {
        self.attempt = attempt.max(1);
        self
    }

    /// Runs it as a worker with this configuration would (default: [`WorkerConfig::default`],
    /// one try, no backoff, a 60 s timeout): the tries, backoff and timeout of a job that
    /// sets none.
    pub fn config(mut self, config: WorkerConfig) -> Run {
        self.config = config;
        self
    }

    /// Runs it through this worker middleware, outside the job's own (as `Worker::middleware`).
    pub fn middleware(mut self, layer: impl Into<Layer>) -> Run {
        self.middleware.push(layer.into());
        self
    }

    /// Gives the run this Redis handle: middleware that keeps its state in Redis (rate limits,
    /// funnels, overlap locks, throttles) use it, and what the job dispatches goes there.
    /// Without one, the run uses the fake queue installed here, if any, else a fake of its
    /// own; such middleware then fails the attempt, saying it needs a real Redis.
    pub fn via(mut self, queue: &RedisQueue) -> Run {
        self.redis = Some(queue.clone());
        self
    }

    /// Gives the job `value` as application state, as `Worker::state` does: a real pool, or
    /// a stub of the test's own. A job that declares state the run was not given fails its
    /// attempt with the message a worker would refuse to start with.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Run {
        self.state.give(value);
        self
    }

    /// Gives the job every value of `state` (the inline fake's).
    pub(crate) fn with_state(mut self, state: State) -> Run {
        self.state = state.into();
        self
    }

    /// [`Run::to_end`] makes at most this many attempts (default [`MAX_ATTEMPTS`]), for a job
    /// with unlimited tries that keeps coming back.
    pub fn max_attempts(mut self, attempts: usize) -> Run {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Runs one attempt.
    pub async fn once(self) -> Attempt {
        let reserved = self.with_attempts(self.attempt);
        let redis = self.handle();
        self.attempt_with(&reserved, &redis, self.checkpoint.clone())
            .await
    }

    /// Runs attempts until the job is done, skipped or failed (or [`Run::max_attempts`] were
    /// made), each after the one before without waiting its backoff, with its counters
    /// carried as Redis would carry them: a release counts an attempt, a retry an exception,
    /// a requeue neither, an interruption its own count; each attempt starts from the
    /// checkpoint the one before saved.
    pub async fn to_end(self) -> Runs {
        let redis = self.handle();
        let mut pushed = self.with_attempts(self.attempt - 1);
        let mut attempts = Vec::new();
        let mut checkpoint = self.checkpoint.clone();
        while attempts.len() < self.max_attempts {
            let made = counters(&pushed).map_or(0, |c| c.attempts);
            let reserved = with_attempts(&pushed, made + 1).unwrap_or_else(|| pushed.clone());
            let attempt = self.attempt_with(&reserved, &redis, checkpoint).await;
            checkpoint = attempt.checkpoint.clone();
            let next = match attempt.outcome {
                Outcome::Released(_) => Some(reserved.clone()),
                Outcome::Retried(_) => counters::after_exception(&reserved),
                Outcome::Requeued(_) => counters::requeued(&reserved),
                Outcome::Interrupted => counters::interrupted(&reserved),
                Outcome::Done | Outcome::Skipped | Outcome::Failed(_) => None,
            };
            attempts.push(attempt);
            match next {
                Some(next) => pushed = next,
                None => break,
            }
        }
        Runs { attempts }
    }

    /// The payload with its attempts counter at `attempts`.
    fn with_attempts(&self, attempts: u32) -> String {
        let payload = self.payload.as_deref().unwrap_or_default();
        with_attempts(payload, attempts).unwrap_or_else(|| payload.to_owned())
    }

    fn handle(&self) -> Arc<RedisQueue> {
        let handle = self
            .redis
            .clone()
            .or_else(redjob::testing::current)
            .unwrap_or_else(|| Fake::new().handle());
        Arc::new(handle)
    }

    /// One attempt of the reserved copy `reserved`, settled as a worker would settle it but
    /// for the queue: what it holds is freed, the `failed()` hook of a failed job called.
    async fn attempt_with(
        &self,
        reserved: &str,
        redis: &Arc<RedisQueue>,
        checkpoint: Option<String>,
    ) -> Attempt {
        let number = counters(reserved).map_or(self.attempt, |c| c.attempts);
        let payload = match &self.payload {
            Ok(_) => reserved,
            Err(why) => return Attempt::failed(number, why.clone()),
        };
        // A worker refuses to start with two job types of one name; a run cannot tell which
        // one the payload means either.
        if let Err(duplicate) = redjob::job::registry::check() {
            return Attempt::failed(number, duplicate.to_string());
        }
        let state = match self.state.checked() {
            Ok(state) => state,
            Err(duplicate) => return Attempt::failed(number, duplicate.to_string()),
        };
        // Synchronous runs check no signature: the payload was built here.
        let unsigned = QueueConfig {
            signing_key: None,
            ..redis.config().clone()
        };
        let decoded = match decode_payload(payload, PayloadCopy::Reserved, &unsigned) {
            Ok(decoded) => decoded,
            Err(undecodable) => return Attempt::failed(number, undecodable.reason),
        };
        // A worker would refuse to start without it.
        if let Some(missing) = decoded.registration.missing_state(state).next() {
            return Attempt::failed(number, missing.to_string());
        }
        let uuid = decoded.payload.uuid;
        let fake = Fake::of(redis);
        let recorded_before = fake.as_ref().map_or(0, |fake| fake.pushed().len());
        let span = attempt_span(&self.config, &decoded, &uuid.to_string(), &self.queue);
        async {
            let around = Surroundings {
                config: &self.config,
                middleware: &self.middleware,
                redis,
                state,
                holds: Arc::new(Holds::default()),
                cancelled: None,
                started: Instant::now(),
                cancels: None,
                worker: "",
                stopping: None,
                reservation: None,
                resume_from: checkpoint,
            };
            let interrupt = CancellationToken::new();
            // What the job dispatches goes to the run's handle.
            let attempt = execute::run(around, &decoded, &self.queue, None, interrupt);
            let (verdict, error, attempt) = redis.scope(attempt).await;
            let ctx = attempt.context();
            let settled = matches!(verdict, Verdict::Done | Verdict::Skip | Verdict::Fail(_));
            if let Err(err) = WorkerQueue::of(redis)
                .free_holds(&ctx.holds().to_free(settled))
                .await
            {
                warn!(error = %err, "cannot free what the job held");
            }
            let mut attempt = Attempt {
                number,
                outcome: Outcome::from(verdict),
                error,
                failed_hook_ran: false,
                dispatched: fake
                    .map_or_else(Vec::new, |fake| fake.pushed().split_off(recorded_before)),
                chain_prepended: Vec::new(),
                chain_appended: Vec::new(),
                batch_added: Vec::new(),
                checkpoint: ctx.checkpoint_json(),
            };
            let chain = take_chain_edits(ctx);
            let batch = take_batch_added(ctx);
            if matches!(attempt.outcome, Outcome::Done | Outcome::Skipped) {
                if let Some((id, edits)) = chain {
                    attempt.chain_prepended = records(&edits.prepend, Origin::Chain { id });
                    attempt.chain_appended = records(&edits.append, Origin::Chain { id });
                }
                if let Some((id, added)) = batch {
                    attempt.batch_added = records(&added, Origin::Batch { id });
                }
            }
            if let Outcome::Failed(reason) = &attempt.outcome {
                if decoded.registration.options().failed_hook {
                    let failed =
                        FailedContext::new(uuid, ctx.job_name(), &self.queue, number, reason);
                    attempt.failed_hook_ran =
                        hooks::call(&self.config, state, &decoded, failed).await;
                }
            }
            attempt
        }
        .instrument(span)
        .await
    }
}

impl IntoFuture for Run {
    type Output = Attempt;
    type IntoFuture = Pin<Box<dyn Future<Output = Attempt> + Send>>;

    /// One attempt, as [`Run::once`].
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.once())
    }
}

fn records(envelopes: &[Envelope], origin: Origin) -> Vec<Recorded> {
    envelopes
        .iter()
        .filter_map(|envelope| Recorded::from_envelope(envelope, origin.clone()))
        .collect()
}

/// What became of a job after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// It finished.
    Done,
    /// A middleware (or the handler) skipped it: settled as done without running the rest.
    Skipped,
    /// The handler or a middleware released it, to run again after this delay; the attempt
    /// counts towards its tries.
    Released(Duration),
    /// The attempt failed (an error, a panic, a timeout) with tries left: it runs again after
    /// this backoff.
    Retried(Duration),
    /// A middleware put it back, to run again after this delay without counting the attempt
    /// (a limit or a lock that was busy).
    Requeued(Duration),
    /// It failed for good, for this reason; a worker would record it in the failed-job store.
    Failed(String),
    /// The handler asked to be put back as a stopping worker's job is ([`JobContext::interrupt`]),
    /// to run again at once without counting the attempt.
    ///
    /// [`JobContext::interrupt`]: redjob::JobContext::interrupt
    Interrupted,
}

impl From<Verdict> for Outcome {
    fn from(verdict: Verdict) -> Outcome {
        match verdict {
            Verdict::Done => Outcome::Done,
            Verdict::Skip => Outcome::Skipped,
            Verdict::Release(after) => Outcome::Released(after),
            Verdict::Retry(after) => Outcome::Retried(after),
            Verdict::Requeue(after) => Outcome::Requeued(after),
            Verdict::Fail(reason) => Outcome::Failed(reason),
            Verdict::Interrupt => Outcome::Interrupted,
            // A synchronous run has no other worker to wait for.
            Verdict::Unrunnable(reason) => Outcome::Failed(reason),
        }
    }
}

/// What one attempt of a synchronous run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Attempt {
    /// Its number: 1 for the first.
    pub number: u32,
    /// What became of the job.
    pub outcome: Outcome,
    /// The error the attempt ended with, its panic or its timeout, if it failed.
    pub error: Option<String>,
    /// Whether the job's `failed()` hook ran to its end (a job that failed for good).
    pub failed_hook_ran: bool,
    /// The jobs it pushed while it ran, when the run's handle is a fake queue's (chains'
    /// first links and batches' jobs included).
    pub dispatched: Vec<Recorded>,
    /// The links its handler put in front of the rest of its chain
    /// ([`ChainEdits::prepend`](redjob::workflow::ChainEdits::prepend)), as they were
    /// prepended, once it is done.
    pub chain_prepended: Vec<Recorded>,
    /// The links its handler added at the end of its chain, once it is done.
    pub chain_appended: Vec<Recorded>,
    /// The jobs its handler added to its batch, once it is done.
    pub batch_added: Vec<Recorded>,
    /// The last checkpoint it saved, or started from, as JSON
    /// ([`JobContext::checkpoint`](redjob::JobContext::checkpoint)).
    pub checkpoint: Option<String>,
}

impl Attempt {
    fn failed(number: u32, reason: String) -> Attempt {
        Attempt {
            number,
            outcome: Outcome::Failed(reason),
            error: None,
            failed_hook_ran: false,
            dispatched: Vec::new(),
            chain_prepended: Vec::new(),
            chain_appended: Vec::new(),
            batch_added: Vec::new(),
            checkpoint: None,
        }
    }
}

/// Every attempt of [`Run::to_end`], in order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Runs {
    /// The attempts made.
    pub attempts: Vec<Attempt>,
}

impl Runs {
    /// The last attempt.
    pub fn last(&self) -> &Attempt {
        self.attempts
            .last()
            .expect("a run makes one attempt at least")
    }

    /// What became of the job in the end.
    pub fn outcome(&self) -> &Outcome {
        &self.last().outcome
    }

    /// Whether it was done (or skipped) in the end.
    pub fn succeeded(&self) -> bool {
        matches!(self.outcome(), Outcome::Done | Outcome::Skipped)
    }

    /// Whether it failed for good in the end.
    pub fn failed(&self) -> bool {
        matches!(self.outcome(), Outcome::Failed(_))
    }
}
