//! The attempt extension point: capabilities that take part in every attempt of every job.
//! Before the handler runs, each attaches what it keeps for the attempt to the job's context
//! (in its [`Extensions`](crate::queue::Extensions)), from the job's payload; when the attempt
//! settles, each may give a [`SettleStep`] that the settling script call applies in the same
//! step as the acknowledgement. Workflows attach this way; the worker names none of them.
//!
//! A capability registers an [`AttemptHook`] with `inventory::submit!` and an
//! [`AttemptHookRegistration`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::job::context::JobContext;
use crate::payload::Payload;
use crate::queue::settle::{SettleStep, SettleSteps};
use crate::queue::RedisQueue;

/// A capability's part in every attempt.
pub trait AttemptHook: Sync + 'static {
    /// Before the handler runs: attaches what the capability keeps for this attempt to `ctx`,
    /// from the job's payload.
    fn start(&self, payload: &Payload, ctx: &JobContext);

    /// Once the attempt is set to run on the worker `worker`: what the capability records of
    /// that in Redis, as a future the worker awaits before the handler runs (default: none).
    fn started(
        &self,
        _ctx: &Arc<JobContext>,
        _queue: &RedisQueue,
        _worker: &str,
    ) -> Option<StartedFuture> {
        None
    }

    /// When the attempt ends with the job done: the step that settling it takes for this
    /// capability, if any, or why the job cannot be settled as done (it then fails, for that
    /// reason).
    fn done(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
    ) -> Result<Option<Box<dyn SettleStep>>, String>;

    /// When the attempt ends with the job failed for good, for `reason`: the step that
    /// settling it takes for this capability, if any.
    fn failed(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
        reason: &str,
    ) -> Option<Box<dyn SettleStep>>;

    /// When the attempt ends with the job going back to its queue, for `reason`: the step
    /// that releasing it takes for this capability, if any (default: none).
    fn released(
        &self,
        _ctx: &JobContext,
        _queue: &RedisQueue,
        _reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        None
    }

    /// When the attempt ends with the job going back because its worker is stopping, its
    /// attempt given back, for `reason`: the step that putting it back takes for this
    /// capability, if any (default: the step of a release).
    fn interrupted(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
        reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        self.released(ctx, queue, reason)
    }
}

/// What a hook records when an attempt starts ([`AttemptHook::started`]).
pub type StartedFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// An [`AttemptHook`], as a capability registers it with `inventory::submit!`.
pub struct AttemptHookRegistration(pub &'static dyn AttemptHook);

inventory::collect!(AttemptHookRegistration);

/// Every registered hook's part in one attempt, held by the worker from the attempt's start to
/// its settlement: made as the attempt starts ([`AttemptHooks::start`]), told when the attempt
/// is set to run ([`AttemptHooks::started`]), and asked for the steps that settle it
/// ([`AttemptHooks::settle_steps`]).
#[derive(Clone)]
pub struct AttemptHooks {
    ctx: Arc<JobContext>,
}

/// How an attempt ended, for the steps its hooks add to settling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd<'a> {
    /// The job is done.
    Done,
    /// The job failed for good, for this reason.
    Failed(&'a str),
    /// The job goes back to its queue, for this reason.
    Released(&'a str),
    /// The job goes back to its queue at once, its attempt given back: its worker is stopping.
    Interrupted(&'a str),
}

impl AttemptHooks {
    /// Lets every registered hook attach its state to `ctx`, the context of an attempt of
    /// `payload`.
    pub fn start(payload: &Payload, ctx: Arc<JobContext>) -> Self {
        for hook in inventory::iter::<AttemptHookRegistration> {
            hook.0.start(payload, &ctx);
        }
        Self { ctx }
    }

    /// The attempt's context.
    pub fn context(&self) -> &Arc<JobContext> {
        &self.ctx
    }

    /// Lets every registered hook record that the attempt starts on the worker `worker`.
    pub async fn started(&self, queue: &RedisQueue, worker: &str) {
        for hook in inventory::iter::<AttemptHookRegistration> {
            if let Some(recording) = hook.0.started(&self.ctx, queue, worker) {
                recording.await;
            }
        }
    }

    /// The steps every registered hook adds to settling the attempt as it ended. When a hook
    /// cannot settle a done attempt as done, the job fails instead: `Err` gives why, with the
    /// steps of that failure.
    #[allow(clippy::type_complexity)]
    pub fn settle_steps(
        &self,
        queue: &RedisQueue,
        end: AttemptEnd<'_>,
    ) -> Result<SettleSteps, (String, SettleSteps)> {
        let ctx = &*self.ctx;
        match end {
            AttemptEnd::Done => {
                let mut steps = SettleSteps::new();
                for hook in inventory::iter::<AttemptHookRegistration> {
                    match hook.0.done(ctx, queue) {
                        Ok(step) => steps.extend(step),
                        Err(reason) => {
                            let steps = each_step(|hook| hook.failed(ctx, queue, &reason));
                            return Err((reason, steps));
                        }
                    }
                }
                Ok(steps)
            }
            AttemptEnd::Failed(reason) => Ok(each_step(|hook| hook.failed(ctx, queue, reason))),
            AttemptEnd::Released(reason) => Ok(each_step(|hook| hook.released(ctx, queue, reason))),
            AttemptEnd::Interrupted(reason) => {
                Ok(each_step(|hook| hook.interrupted(ctx, queue, reason)))
            }
        }
    }
}

/// The step each registered hook gives, as `step` asks it.
fn each_step(step: impl Fn(&dyn AttemptHook) -> Option<Box<dyn SettleStep>>) -> SettleSteps {
    inventory::iter::<AttemptHookRegistration>
        .into_iter()
        .filter_map(|hook| step(hook.0))
        .collect()
}
