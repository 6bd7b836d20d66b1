//! The attempt extension point: capabilities that take part in every attempt of every job.
//! Before the handler runs, each attaches what it keeps for the attempt to the job's context
//! (in its [`Extensions`](crate::queue::Extensions)), from the job's payload; when the attempt
//! settles, each may give a [`SettleStep`] that the settling script call applies in the same
//! step as the acknowledgement. Workflows attach this way; the worker names none of them.
//!
//! A capability registers an [`AttemptHook`] with `inventory::submit!` and an
//! [`AttemptHookRegistration`].

use crate::job::context::JobContext;
use crate::payload::Payload;
use crate::queue::settle::SettleStep;
use crate::queue::RedisQueue;

/// A capability's part in every attempt.
pub trait AttemptHook: Sync + 'static {
    /// Before the handler runs: attaches what the capability keeps for this attempt to `ctx`,
    /// from the job's payload.
    fn start(&self, payload: &Payload, ctx: &JobContext);

    /// When the attempt ends with the job done: the step that settling it takes for this
    /// capability, if any, or why the job cannot be settled as done (it then fails, for that
    /// reason).
    fn done(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
    ) -> Result<Option<Box<dyn SettleStep>>, String>;

    /// When the attempt ends with the job failed for good: the step that settling it takes
    /// for this capability, if any.
    fn failed(&self, ctx: &JobContext, queue: &RedisQueue) -> Option<Box<dyn SettleStep>>;
}

/// An [`AttemptHook`], as a capability registers it with `inventory::submit!`.
pub struct AttemptHookRegistration(pub &'static dyn AttemptHook);

inventory::collect!(AttemptHookRegistration);

/// Lets every registered hook attach its state to the context of an attempt of `payload`.
pub fn start(payload: &Payload, ctx: &JobContext) {
    for hook in inventory::iter::<AttemptHookRegistration> {
        hook.0.start(payload, ctx);
    }
}

/// The steps every registered hook adds to settling the attempt of `ctx` as done. When a hook
/// cannot settle it as done, the job fails instead: `Err` gives why, with the steps of that
/// failure.
#[allow(clippy::type_complexity)]
pub fn done_steps(
    ctx: &JobContext,
    queue: &RedisQueue,
) -> Result<Vec<Box<dyn SettleStep>>, (String, Vec<Box<dyn SettleStep>>)> {
    let mut steps = Vec::new();
    for hook in inventory::iter::<AttemptHookRegistration> {
        match hook.0.done(ctx, queue) {
            Ok(step) => steps.extend(step),
            Err(reason) => return Err((reason, failed_steps(ctx, queue))),
        }
    }
    Ok(steps)
}

/// The steps every registered hook adds to settling the attempt of `ctx` as failed for good.
pub fn failed_steps(ctx: &JobContext, queue: &RedisQueue) -> Vec<Box<dyn SettleStep>> {
    inventory::iter::<AttemptHookRegistration>
        .into_iter()
        .filter_map(|hook| hook.0.failed(ctx, queue))
        .collect()
}
