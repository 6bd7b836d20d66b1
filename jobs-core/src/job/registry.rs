//! The registry of job types, filled at link time by `#[job]`.
//!
//! Each `#[job]` submits a [`JobRegistration`] through `inventory`, so a worker finds every job
//! type linked into its binary by name without hand-written registration.

use serde_json::value::RawValue;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use crate::job::context::JobContext;
use crate::job::failed::FailedContext;
use crate::job::middleware::{JobFuture, Layer};
use crate::job::state::{MissingState, State, StateType};
use crate::job::{Job, JobOptions};

/// How a worker runs one job type: its name, its options, and a function that decodes the
/// payload's `data` into the job and returns the handler's future.
pub struct JobRegistration {
    name: &'static str,
    type_name: fn() -> &'static str,
    options: fn() -> JobOptions,
    state: &'static [StateType],
    start: fn(&RawValue, Arc<JobContext>) -> Result<Started, serde_json::Error>,
    failed: fn(&RawValue, FailedContext) -> Result<HookFuture, serde_json::Error>,
}

/// A running hook, as the worker drives it.
pub type HookFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A job decoded and ready to run: its middleware and its handler, not yet started.
pub struct Started {
    /// The job type's middleware, outermost first.
    pub middleware: Vec<Layer>,
    /// The handler's future.
    pub handler: JobFuture,
}

impl JobRegistration {
    /// The registration of job type `J`. `#[job]` submits one per job type.
    pub const fn of<J: Job>() -> Self {
        JobRegistration {
            name: J::NAME,
            type_name: std::any::type_name::<J>,
            options: J::options,
            state: J::STATE,
            start: start::<J>,
            failed: failed::<J>,
        }
    }

    /// The registered name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Rust type's name.
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }

    /// The job type's options.
    pub fn options(&self) -> JobOptions {
        (self.options)()
    }

    /// The application state the job type reads ([`Job::STATE`]).
    pub fn state(&self) -> &'static [StateType] {
        self.state
    }

    /// The state the job type declares and `state` lacks.
    pub fn missing_state<'a>(&self, state: &'a State) -> impl Iterator<Item = MissingState> + 'a {
        let (job, job_type) = (self.name, self.type_name());
        self.state
            .iter()
            .filter(|ty| !state.contains(**ty))
            .map(move |ty| MissingState {
                job,
                job_type,
                state_type: ty.name(),
            })
    }

    /// Decodes `data` into the job and returns the future of its [`Job::failed`] hook.
    pub fn failed(
        &self,
        data: &RawValue,
        ctx: FailedContext,
    ) -> Result<HookFuture, serde_json::Error> {
        (self.failed)(data, ctx)
    }

    /// Decodes `data` into the job: its middleware, and the future that runs its handler.
    pub fn start(
        &self,
        data: &RawValue,
        ctx: Arc<JobContext>,
    ) -> Result<Started, serde_json::Error> {
        (self.start)(data, ctx)
    }
}

/// Decodes `data` into the job and returns its [`Job::failed`] hook's future.
fn failed<J: Job>(data: &RawValue, ctx: FailedContext) -> Result<HookFuture, serde_json::Error> {
    let job: J = crate::payload::laravel::job_data(data.get())?;
    Ok(Box::pin(async move { job.failed(&ctx).await }))
}

fn start<J: Job>(data: &RawValue, ctx: Arc<JobContext>) -> Result<Started, serde_json::Error> {
    let job: J = crate::payload::laravel::job_data(data.get())?;
    Ok(Started {
        middleware: job.middleware(),
        handler: Box::pin(async move {
            let output = job.handle(&ctx).await?;
            ctx.keep_output(&output);
            Ok(())
        }),
    })
}

inventory::collect!(JobRegistration);

/// Two job types registered under one name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("job name {name:?} is registered by both {first} and {second}; give one of them #[job(name = \"...\")]")]
pub struct DuplicateJobName {
    /// The name both use.
    pub name: &'static str,
    /// One type.
    pub first: &'static str,
    /// The other type.
    pub second: &'static str,
}

struct Registry {
    by_name: HashMap<&'static str, &'static JobRegistration>,
    by_laravel_class: HashMap<&'static str, &'static JobRegistration>,
    duplicate: Option<DuplicateJobName>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut by_name = HashMap::new();
        let mut by_laravel_class = HashMap::new();
        let mut duplicate = None;
        for registration in inventory::iter::<JobRegistration> {
            let names = [
                (&mut by_name, Some(registration.name)),
                (&mut by_laravel_class, registration.options().laravel),
            ];
            for (map, name) in names {
                let Some(name) = name else { continue };
                if let Some(first) = map.insert(name, registration) {
                    duplicate.get_or_insert(DuplicateJobName {
                        name,
                        first: first.type_name(),
                        second: registration.type_name(),
                    });
                }
            }
        }
        Registry {
            by_name,
            by_laravel_class,
            duplicate,
        }
    })
}

/// The registration of the job called `name`.
pub fn find(name: &str) -> Option<&'static JobRegistration> {
    registry().by_name.get(name).copied()
}

/// The registration of the job declared for the Laravel class `class` (`#[job(laravel =
/// "...")]`).
pub fn find_laravel(class: &str) -> Option<&'static JobRegistration> {
    registry().by_laravel_class.get(class).copied()
}

/// Every registered job type, sorted by name.
pub fn all() -> Vec<&'static JobRegistration> {
    let mut all: Vec<_> = registry().by_name.values().copied().collect();
    all.sort_by_key(|r| r.name);
    all
}

/// Checks that every registered job type finds the state it declares in `state`; otherwise
/// returns what is missing, one entry per job and type. Workers refuse to start then.
pub fn check_state(state: &State) -> Result<(), Vec<MissingState>> {
    let missing: Vec<MissingState> = all()
        .into_iter()
        .flat_map(|registration| registration.missing_state(state))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

/// Checks that no two job types share a name or a Laravel class; workers refuse to start
/// otherwise.
pub fn check() -> Result<(), DuplicateJobName> {
    registry().duplicate.clone().map_or(Ok(()), Err)
}
