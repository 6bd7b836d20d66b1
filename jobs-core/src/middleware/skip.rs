//! Skipping a job when a condition holds.

use async_trait::async_trait;

use super::{Middleware, Next};
use crate::job::context::JobContext;
use crate::job::JobResult;

/// Skips the job, settled as done without running its handler, when a condition holds
/// (Laravel's `Skip::when` and `Skip::unless`). The condition is decided when the job's
/// middleware is built, from the job's data.
///
/// ```
/// # use redjob::middleware::{Layer, Skip};
/// # struct Refund { amount: u64 }
/// # impl Refund { fn middleware(&self) -> Vec<Layer> {
/// vec![Skip::when(self.amount == 0).into()]
/// # } }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Skip {
    skip: bool,
}

impl Skip {
    /// Skips when `condition` is true.
    pub fn when(condition: bool) -> Self {
        Skip { skip: condition }
    }

    /// Skips when `condition` is false.
    pub fn unless(condition: bool) -> Self {
        Skip { skip: !condition }
    }
}

#[async_trait]
impl Middleware for Skip {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        if self.skip {
            ctx.skip();
            return Ok(());
        }
        next.run(ctx).await
    }
}
