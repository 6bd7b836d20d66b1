//! The watchdog: acts on a handler that runs past its timeout without giving its thread back.
//!
//! A job's timeout stops an async handler at its next `.await`. A handler that blocks its
//! thread (a long computation, `std::thread::sleep`, blocking I/O) never reaches one, so the
//! timeout cannot stop it, and without the watchdog it would hold its slot, and its
//! reservation through the lease, for as long as it blocks. The watchdog runs on its own
//! OS thread, which no blocked runtime thread can hold up. When a handler is still running
//! [`MARGIN`] after its timeout, the watchdog takes the job over (the lease stops extending
//! its reservation and its processor will not settle it), then does what the worker's
//! [`OnBlocked`] says.
//!
//! With [`OnBlocked::ExitProcess`] (the worker binary's, as Laravel's worker kills itself
//! when a job times out):
//! 1. it stops the worker from taking jobs and interrupts the other running jobs, which are
//!    put back on their queues by the usual shutdown path, waiting up to [`WIND_DOWN`] for
//!    them and for the acknowledgement of finished jobs;
//! 2. it applies the timeout rules to the job through a Redis connection and runtime of its
//!    own: on its last attempt, or with `fail_on_timeout`, the job goes to the failed-job
//!    store as `<displayName> has timed out.`; otherwise it stays reserved and comes back
//!    after `--retry-after` with its attempt counted (releasing it at once could start it
//!    elsewhere while its handler still blocks here);
//! 3. it ends the process with status [`EXIT_CODE`].
//!
//! With [`OnBlocked::AbandonJob`] (an embedded worker's default), it applies the timeout rules
//! as in step 2 and goes on watching; the worker goes on, one slot short until the handler
//! returns.

use redjob::RedisQueue;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::config::OnBlocked;
use crate::runtime::acker::AckSender;
use crate::runtime::deadline::Deadline;
use crate::runtime::execute::{job_span, settle_steps, verdict};
use crate::runtime::lease::Running;
use crate::runtime::reserved::{JobId, Reserved};
use crate::runtime::rules::{AttemptError, Verdict};
use crate::runtime::settler::{AttemptEffects, Settler};

/// The process exit status after the watchdog ended a worker: 1, as Laravel's worker exits
/// when a job times out.
pub const EXIT_CODE: u8 = 1;

/// How long past its timeout a handler may still run before the watchdog acts. An async
/// handler is stopped by its timeout within milliseconds; one still running this much later
/// is blocking its thread.
pub(crate) const MARGIN: Duration = Duration::from_secs(1);

/// The longest the watchdog waits for the other running jobs to be put back, and finished
/// jobs to be acknowledged, before it ends the process. Jobs not settled by then come back
/// after `--retry-after`.
pub(crate) const WIND_DOWN: Duration = Duration::from_secs(2);

/// How often the watchdog looks at the running jobs' deadlines.
const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// The parts of a worker the watchdog watches and acts on.
pub(crate) struct Guarded {
    /// The running jobs, with their handlers' deadlines.
    pub running: Arc<Running>,
    /// The worker's settler, which the watchdog reuses through a connection of its own.
    pub settler: Settler,
    /// The Redis handle whose server and settings the watchdog's own connection copies.
    pub queue: RedisQueue,
    /// The acker's sender, to see whether finished jobs are still being acknowledged.
    pub acks: AckSender,
    /// Stops the worker from taking more jobs.
    pub stop: CancellationToken,
    /// Interrupts the running handlers, which puts their jobs back on their queues.
    pub interrupt: CancellationToken,
    /// Whether to end the process or abandon the handler.
    pub on_blocked: OnBlocked,
    /// How long a cancelled handler may go on before it is stopped.
    pub cancel_grace: Duration,
}

/// The watchdog thread; dropping the handle stops it.
pub(crate) struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the watchdog thread. Without a thread (the system refused one), handlers that
    /// block past their timeout are not stopped, and this is logged as an error.
    pub(crate) fn start(guarded: Guarded) -> Watchdog {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("jobs-watchdog".into())
            .spawn(move || guarded.watch(stopped));
        match thread {
            Ok(thread) => Watchdog {
                stop: Some(stop),
                thread: Some(thread),
            },
            Err(err) => {
                error!(error = %err, "cannot start the watchdog thread: a handler that blocks its thread past its timeout will not be stopped");
                Watchdog {
                    stop: None,
                    thread: None,
                }
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Guarded {
    fn watch(self, stopped: mpsc::Receiver<()>) {
        while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECK_INTERVAL) {
            let overdue = self
                .running
                .take_over_overdue(Instant::now(), MARGIN, self.cancel_grace);
            if overdue.is_empty() {
                continue;
            }
            match self.on_blocked {
                OnBlocked::ExitProcess => self.end_process(overdue),
                OnBlocked::AbandonJob => self.abandon(overdue),
            }
        }
    }

    /// Applies the timeout rules to the jobs taken over and leaves their handlers their
    /// threads; the worker goes on.
    fn abandon(&self, overdue: Vec<(Reserved, Deadline)>) {
        blame(
            &overdue,
            "abandoning it (its slot stays taken until it returns)",
        );
        self.settle_on_own_runtime(overdue);
    }

    fn end_process(&self, mut overdue: Vec<(Reserved, Deadline)>) -> ! {
        blame(&overdue, ENDING);
        self.stop.cancel();
        self.interrupt.cancel();
        self.wait_for_other_jobs(overdue.len());
        // Handlers that ran past their own deadlines meanwhile get the timeout rules too.
        let late = self
            .running
            .take_over_overdue(Instant::now(), MARGIN, self.cancel_grace);
        blame(&late, ENDING);
        overdue.extend(late);
        self.settle_on_own_runtime(overdue);
        error!(
            exit_code = EXIT_CODE,
            "worker ended: a job ran past its timeout without giving its thread back"
        );
        std::process::exit(EXIT_CODE.into())
    }

    /// Applies the timeout rules to the jobs taken over ([`Guarded::settle`]) on a runtime of
    /// the watchdog's own, which no blocked thread of the worker's can hold up.
    fn settle_on_own_runtime(&self, overdue: Vec<(Reserved, Deadline)>) {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(self.settle(overdue)),
            Err(err) => error!(
                error = %err,
                "cannot start the watchdog's runtime; the jobs that timed out come back after retry_after"
            ),
        }
    }

    /// Waits until only the jobs taken over are left and every finished job is acknowledged,
    /// or [`WIND_DOWN`] has passed.
    fn wait_for_other_jobs(&self, taken_over: usize) {
        let deadline = Instant::now() + WIND_DOWN;
        let settled = || self.running.only_taken_over_left() && self.acks.unacknowledged() == 0;
        if settled() {
            return;
        }
        info!(
            running = self.running.len().saturating_sub(taken_over),
            unacknowledged = self.acks.unacknowledged(),
            "putting the other running jobs back on their queues"
        );
        while !settled() {
            if Instant::now() >= deadline {
                warn!(
                    "jobs still running or unacknowledged after {WIND_DOWN:?} come back after retry_after"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Applies the timeout rules to the jobs taken over: fails those out of tries (or with
    /// fail_on_timeout); leaves the others reserved to come back after retry_after.
    async fn settle(&self, overdue: Vec<(Reserved, Deadline)>) {
        let settler = match self.queue.with_own_connection() {
            Ok(queue) => self.settler.with_queue(queue),
            Err(err) => {
                error!(error = %err, "cannot connect to Redis; the jobs that timed out come back after retry_after");
                return;
            }
        };
        for (job, deadline) in overdue {
            let span = span(&job, &deadline);
            let ctx = deadline.attempt.context();
            let name = &deadline.display_name;
            let timed_out = Err(AttemptError::Timeout);
            match verdict(ctx, &deadline.limits, name, timed_out) {
                (verdict @ Verdict::Fail(_), error) => {
                    let uuid = ctx.uuid().to_string();
                    let id = JobId {
                        uuid: &uuid,
                        job: ctx.job_name(),
                        attempt: ctx.attempt(),
                        tags: &[],
                        // The hook is owed: a worker's hooks service (this one's, or
                        // another's once this process has ended) runs it.
                        failed_hook: redjob::job::registry::find(ctx.job_name())
                            .is_some_and(|r| r.options().failed_hook),
                    };
                    let (verdict, steps) = settle_steps(
                        &deadline.attempt,
                        &settler.queue,
                        verdict,
                        error.as_deref(),
                    );
                    let effects = AttemptEffects {
                        holds: ctx.holds(),
                        steps,
                    };
                    settler
                        .settle(job, id, verdict, error, deadline.started.elapsed(), effects)
                        .instrument(span)
                        .await;
                }
                _ => span.in_scope(|| {
                    warn!("{name} has timed out; it stays reserved and comes back after retry_after with its attempt counted")
                }),
            }
        }
    }
}

/// What the watchdog does about a blocked handler when it ends the process.
const ENDING: &str = "ending the worker process";

/// Logs, for each job taken over, why, and what the watchdog does about it (`consequence`).
fn blame(overdue: &[(Reserved, Deadline)], consequence: &str) {
    for (job, deadline) in overdue {
        span(job, deadline).in_scope(|| {
            if deadline.attempt.context().is_cancelled() {
                error!(
                    "still running past its cancel grace: the handler blocks its thread, \
                     which a cancel cannot interrupt; {consequence}"
                )
            } else {
                error!(
                    timeout_s = deadline.timeout.map_or(0.0, |t| t.as_secs_f64()),
                    "still running {MARGIN:?} past its timeout: the handler blocks its thread, \
                     which a timeout cannot interrupt; {consequence}"
                )
            }
        });
    }
}

fn span(job: &Reserved, deadline: &Deadline) -> tracing::Span {
    let ctx = deadline.attempt.context();
    job_span(
        &deadline.display_name,
        &ctx.uuid().to_string(),
        &job.queue.name,
        ctx.attempt(),
    )
}
