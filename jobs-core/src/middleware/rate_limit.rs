//! Rate limits: at most so many jobs per window, across every worker.

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

use super::busy::{when_busy_builders, WhenBusy};
use super::{redis, Middleware, Next};
use crate::job::context::JobContext;
use crate::job::{JobError, JobResult};
use crate::queue::scripts;

/// A rate: at most `max` jobs within any window of `window`, optionally kept apart by a key
/// (`by`), so that each account (say) has a window of its own.
///
/// ```
/// use redjob::middleware::Limit;
/// let limit = Limit::per_minute(60).by("account:7");
/// assert_eq!(limit.max(), 60);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    name: Option<String>,
    max: u32,
    window: Duration,
    by: String,
}

impl Limit {
    /// At most `max` jobs within any window of `window`.
    pub fn new(max: u32, window: Duration) -> Self {
        Limit {
            name: None,
            max,
            window,
            by: String::new(),
        }
    }

    /// At most `max` jobs within any second.
    pub fn per_second(max: u32) -> Self {
        Limit::new(max, Duration::from_secs(1))
    }

    /// At most `max` jobs within any minute.
    pub fn per_minute(max: u32) -> Self {
        Limit::new(max, Duration::from_secs(60))
    }

    /// At most `max` jobs within any hour.
    pub fn per_hour(max: u32) -> Self {
        Limit::new(max, Duration::from_secs(3600))
    }

    /// At most `max` jobs within any day.
    pub fn per_day(max: u32) -> Self {
        Limit::new(max, Duration::from_secs(86_400))
    }

    /// Counts separately for each value of `key`.
    pub fn by(mut self, key: impl ToString) -> Self {
        self.by = key.to_string();
        self
    }

    /// Names the limit; its window is shared by every job type that uses the name. Unnamed, a
    /// limit is named after the job type.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The most jobs within one window.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        self.window
    }
}

fn defined() -> &'static RwLock<HashMap<String, Limit>> {
    static DEFINED: OnceLock<RwLock<HashMap<String, Limit>>> = OnceLock::new();
    DEFINED.get_or_init(RwLock::default)
}

/// Defines the rate limit `name`, once at startup, for jobs to use by name
/// ([`RateLimited::named`]), as Laravel's `RateLimiter::for`. A second definition replaces
/// the first.
///
/// ```
/// use redjob::middleware::{define_limit, Limit};
/// define_limit("stripe", Limit::per_second(100));
/// ```
pub fn define_limit(name: impl Into<String>, limit: Limit) {
    let name = name.into();
    let limit = Limit {
        name: Some(name.clone()),
        ..limit
    };
    defined()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name, limit);
}

/// A limit as a job asks for it: given in full, or by the name it was defined under.
#[derive(Debug, Clone)]
enum Wanted {
    Given(Limit),
    Named { name: String, by: Option<String> },
}

/// Runs a job only when each of its rate limits has room, and then counts it against all of
/// them (Laravel's `RateLimited`, with its races closed). Every limit is checked and counted in
/// one script call on Redis's clock, so no limit is ever exceeded, whatever the number of
/// workers, and a job refused by one limit is not counted by another.
///
/// A refused job is requeued, without counting an attempt, to the moment room is expected
/// for it; a backlog is told to come back one by one, a window's share at a time.
///
/// ```
/// # use redjob::middleware::{Layer, Limit, RateLimited};
/// # struct Charge { account: u64 }
/// # impl Charge { fn middleware(&self) -> Vec<Layer> {
/// vec![RateLimited::named("stripe")
///     .and(Limit::per_minute(10).by(self.account))
///     .into()]
/// # } }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimited {
    limits: Vec<Wanted>,
    when_busy: WhenBusy,
}

impl RateLimited {
    /// Limited by `limit`.
    pub fn new(limit: Limit) -> Self {
        RateLimited {
            limits: vec![Wanted::Given(limit)],
            when_busy: WhenBusy::Requeue,
        }
    }

    /// Limited by the limit defined as `name` ([`define_limit`]). A job whose limit is not
    /// defined in the worker's process fails, saying so.
    pub fn named(name: impl Into<String>) -> Self {
        RateLimited {
            limits: vec![Wanted::Named {
                name: name.into(),
                by: None,
            }],
            when_busy: WhenBusy::Requeue,
        }
    }

    /// Counts the last named limit separately for each value of `key`.
    pub fn by(mut self, key: impl ToString) -> Self {
        match self.limits.last_mut() {
            Some(Wanted::Named { by, .. }) => *by = Some(key.to_string()),
            Some(Wanted::Given(limit)) => limit.by = key.to_string(),
            None => {}
        }
        self
    }

    /// Also limited by `limit`.
    pub fn and(mut self, limit: Limit) -> Self {
        self.limits.push(Wanted::Given(limit));
        self
    }

    /// Also limited by the limit defined as `name`.
    pub fn and_named(mut self, name: impl Into<String>) -> Self {
        self.limits.push(Wanted::Named {
            name: name.into(),
            by: None,
        });
        self
    }

    when_busy_builders! {
        /// Counts the wait as an attempt, as Laravel's middleware does.
        fn count_attempt;

        /// Drops a job over the limit, settled as done (Laravel's `dontRelease()`).
        fn dont_release;
    }

    /// The limits in full: named ones looked up.
    fn resolve(&self) -> Result<Vec<Limit>, JobError> {
        let defined = defined().read().unwrap_or_else(|e| e.into_inner());
        self.limits
            .iter()
            .map(|wanted| match wanted {
                Wanted::Given(limit) => Ok(limit.clone()),
                Wanted::Named { name, by } => {
                    let limit = defined.get(name).ok_or_else(|| {
                        JobError::msg(format!(
                            "rate limit {name:?} is not defined in this worker: define it at \
                             startup with redjob::middleware::define_limit"
                        ))
                    })?;
                    let by = by.clone().unwrap_or_else(|| limit.by.clone());
                    Ok(Limit {
                        by,
                        ..limit.clone()
                    })
                }
            })
            .collect()
    }
}

#[async_trait]
impl Middleware for RateLimited {
    async fn handle(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        let redis = redis(ctx, "RateLimited")?;
        let limits = match self.resolve() {
            Ok(limits) => limits,
            Err(undefined) => {
                ctx.fail(undefined.to_string());
                return Ok(());
            }
        };
        let keys: Vec<String> = limits
            .iter()
            .map(|limit| {
                let name = limit.name.as_deref().unwrap_or(ctx.job_name());
                redis.keys().limit(name, &limit.by)
            })
            .collect();
        let mut call = scripts::LIMIT.prepare_invoke();
        call.arg(ctx.owner());
        for (key, limit) in keys.iter().zip(&limits) {
            call.key(key)
                .arg(limit.max.max(1))
                .arg(limit.window.as_micros().max(1) as u64);
        }
        let wait_us: u64 = redis.invoke(&call).await?;
        if wait_us > 0 {
            self.when_busy.apply(ctx, Duration::from_micros(wait_us));
            return Ok(());
        }
        next.run(ctx).await
    }
}
