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
use crate::queue::settle::{Ending, SettleStep};
use crate::queue::RedisQueue;

/// A capability's part in every attempt.
pub trait AttemptHook: Sync + 'static {
    /// Before the handler runs: attaches what the capability keeps for this attempt to `ctx`,
    /// from the job's payload.
    fn start(&self, payload: &Payload, ctx: &JobContext);

    /// When the attempt ends with the job done or failed for good: the step that settling it
    /// takes for this capability, if any. `Err` gives why a job that is done cannot be settled
    /// as done (it then fails, for that reason); for a failed job it is never `Err`.
    fn settle(
        &self,
        ctx: &JobContext,
        queue: &RedisQueue,
        ending: Ending,
    ) -> Result<Option<Box<dyn SettleStep>>, String>;
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

/// The steps every registered hook adds to settling the attempt of `ctx` with `ending`; `Err`
/// gives why a job that is done cannot be settled as done.
pub fn settle_steps(
    ctx: &JobContext,
    queue: &RedisQueue,
    ending: Ending,
) -> Result<Vec<Box<dyn SettleStep>>, String> {
    let mut steps = Vec::new();
    for hook in inventory::iter::<AttemptHookRegistration> {
        steps.extend(hook.0.settle(ctx, queue, ending)?);
    }
    Ok(steps)
}
