//! Throttling a job whose runs keep failing: a circuit breaker per key.

use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

use super::{redis, Middleware, Next};
use crate::job::context::JobContext;
use crate::job::{JobError, JobResult};
use crate::queue::scripts;

/// Predicate on an attempt's error.
type ErrorFilter = Arc<dyn Fn(&JobError) -> bool + Send + Sync>;

/// A circuit breaker (Laravel's `ThrottlesExceptions`): once jobs with one key have failed
/// `max_errors` times within `window`, further jobs with that key are requeued, without
/// counting an attempt, until the window ends; a success closes the breaker at once.
///
/// Unlike Laravel's, the error is not swallowed: the attempt fails as it would without the
/// breaker (its tries, backoff and `failed()` hook apply), and it is counted by the breaker.
/// With [`backoff`](Self::backoff), a counted error releases the job after that delay instead
/// of its own backoff.
///
/// ```
/// # use redjob::middleware::{Layer, ThrottleExceptions};
/// # use std::time::Duration;
/// # fn middleware() -> Vec<Layer> {
/// vec![ThrottleExceptions::new(10, Duration::from_secs(600))
///     .by("crm-api")
///     .when(|err| err.to_string().contains("503"))
///     .into()]
/// # }
/// ```
#[derive(Clone)]
pub struct ThrottleExceptions {
    max_errors: u32,
    window: Duration,
    by: Option<String>,
    backoff: Option<Duration>,
    when: Option<ErrorFilter>,
}

impl std::fmt::Debug for ThrottleExceptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThrottleExceptions")
            .field("max_errors", &self.max_errors)
            .field("window", &self.window)
            .field("by", &self.by)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl ThrottleExceptions {
    /// Opens after `max_errors` errors within `window`, for the rest of that window.
    pub fn new(max_errors: u32, window: Duration) -> Self {
        ThrottleExceptions {
            max_errors,
            window,
            by: None,
            backoff: None,
            when: None,
        }
    }

    /// One breaker per value of `key`, shared by every job type that uses it (default: one
    /// per job type).
    pub fn by(mut self, key: impl ToString) -> Self {
        self.by = Some(key.to_string());
        self
    }

    /// Releases a job after a counted error after `delay` instead of its own backoff.
    pub fn backoff(mut self, delay: impl Into<crate::payload::delay::Delay>) -> Self {
        self.backoff = Some(delay.into().duration_from_now());
        self
    }

    /// Counts only the errors for which `predicate` holds.
    pub fn when(mut self, predicate: impl Fn(&JobError) -> bool + Send + Sync + 'static) -> Self {
        self.when = Some(Arc::new(predicate));
        self
    }
}

#[async_trait]
impl Middleware for ThrottleExceptions {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        let redis = redis(ctx, "ThrottleExceptions")?;
        let key = redis
            .keys()
            .breaker(self.by.as_deref().unwrap_or(ctx.job_name()));
        let breaker = |op: &'static str| {
            let mut call = scripts::BREAKER.key(&key);
            call.arg(op)
                .arg(self.max_errors.max(1))
                .arg(self.window.as_millis().max(1) as u64);
            call
        };
        let wait_ms: u64 = redis.invoke(&breaker("check")).await?;
        if wait_ms > 0 {
            ctx.requeue(Duration::from_millis(wait_ms));
            return Ok(());
        }
        let result = next.run(ctx).await;
        let op = match &result {
            Ok(()) => "clear",
            Err(err) if self.when.as_ref().is_none_or(|counts| counts(err)) => {
                if let Some(delay) = self.backoff {
                    ctx.release(delay);
                }
                "hit"
            }
            Err(_) => return result,
        };
        // The attempt has run: a breaker that cannot be updated must not change its outcome.
        if let Err(err) = redis.invoke::<u64>(&breaker(op)).await {
            tracing::warn!(error = %err, breaker = %key, "cannot update the exception throttle");
        }
        result
    }
}
