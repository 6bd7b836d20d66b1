//! Application state for handlers: the values a program gives its worker once (a database
//! pool, an HTTP client, its settings), which every attempt reads by type, without a lock.
//!
//! A job type says which state it reads (`#[job(state = PgPool)]`), so a worker can refuse to
//! start without it instead of failing jobs in production; see [`JobContext::state`].
//!
//! [`JobContext::state`]: crate::JobContext::state

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The state a worker (or a synchronous run, or the inline fake) hands to every attempt: at
/// most one value per type, fixed once the worker starts. Cheap to clone: clones share the
/// values.
///
/// ```
/// use redjob::State;
///
/// #[derive(Clone)]
/// struct Mailer { from: &'static str }
///
/// let mut state = State::new();
/// state.insert(Mailer { from: "billing@example.com" }).unwrap();
/// assert_eq!(state.get::<Mailer>().unwrap().from, "billing@example.com");
/// assert!(state.insert(Mailer { from: "again" }).is_err(), "one value per type");
/// ```
#[derive(Clone, Default)]
pub struct State {
    // `None` until a value is inserted: a worker without state allocates nothing.
    values: Option<Arc<HashMap<TypeId, Value>>>,
}

#[derive(Clone)]
struct Value {
    value: Arc<dyn Any + Send + Sync>,
    type_name: &'static str,
}

/// A second value of a type already in the [`State`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "state of type {type_name} is given twice; wrap one of the values in a type of its own \
     (struct ReportsDb(PgPool))"
)]
pub struct DuplicateState {
    /// The type given twice.
    pub type_name: &'static str,
}

/// State a job type declares (`#[job(state = ...)]`) that its worker was not given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "job {job} ({job_type}) needs state of type {state_type}, which this worker was not given: \
     add it with .state(...) where the worker is built"
)]
pub struct MissingState {
    /// The job's registered name.
    pub job: &'static str,
    /// The job's Rust type.
    pub job_type: &'static str,
    /// The state type it declares.
    pub state_type: &'static str,
}

impl State {
    /// An empty state.
    pub fn new() -> Self {
        State::default()
    }

    /// Adds `value`, the one value of its type. A second value of one type is refused: wrap
    /// one of them in a newtype, so that each handler says which it means.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Result<(), DuplicateState> {
        let type_name = std::any::type_name::<T>();
        let values = Arc::make_mut(self.values.get_or_insert_with(Arc::default));
        if values.contains_key(&TypeId::of::<T>()) {
            return Err(DuplicateState { type_name });
        }
        let value = Value {
            value: Arc::new(value),
            type_name,
        };
        values.insert(TypeId::of::<T>(), value);
        Ok(())
    }

    /// The value of type `T`, if one was given.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.values
            .as_ref()?
            .get(&TypeId::of::<T>())?
            .value
            .downcast_ref()
    }

    /// Whether a value of the type `ty` was given.
    pub fn contains(&self, ty: StateType) -> bool {
        self.values
            .as_ref()
            .is_some_and(|values| values.contains_key(&ty.id()))
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self
            .values
            .iter()
            .flat_map(|values| values.values().map(|value| value.type_name))
            .collect();
        names.sort_unstable();
        f.debug_struct("State").field("types", &names).finish()
    }
}

/// What one job's handler or hook reads: the state its worker was given, and the types its job
/// type declares. Both contexts ([`JobContext`](crate::JobContext) and
/// [`FailedContext`](crate::FailedContext)) read through it, with the same checks.
#[derive(Clone, Default, Debug)]
pub(crate) struct JobState {
    given: State,
    declared: &'static [StateType],
}

impl JobState {
    pub(crate) fn new(given: &State, declared: &'static [StateType]) -> Self {
        JobState {
            given: given.clone(),
            declared,
        }
    }

    /// The declared state of type `T`, for job `job`. Panics when the job type does not
    /// declare `T`, or when it was not given (which a worker's check at start rules out).
    #[track_caller]
    pub(crate) fn declared<T: Send + Sync + 'static>(&self, job: &str) -> &T {
        let wanted = TypeId::of::<T>();
        let type_name = std::any::type_name::<T>();
        if !self.declared.iter().any(|ty| ty.id() == wanted) {
            panic!(
                "job {job} reads state of type {type_name} without declaring it: write \
                 #[job(state = {type_name})] so that workers check for it before they start",
            );
        }
        match self.given.get::<T>() {
            Some(value) => value,
            None => panic!(
                "job {job} reads state of type {type_name}, which it was not given: give it \
                 where the worker is built, with .state(...)",
            ),
        }
    }

    /// The state of type `T`, if it was given; declared or not.
    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.given.get::<T>()
    }
}

/// How a worker hands a job's context its state. Not a public API: exported from the hidden
/// `redjob::__worker` module.
pub trait StateSetup {
    /// This context with the application state `state`, of which the job type declares
    /// `declared`.
    fn with_state(self, state: &State, declared: &'static [StateType]) -> Self;
}

/// A type of state a job declares with `#[job(state = ...)]`: its id and its name.
#[derive(Clone, Copy)]
pub struct StateType {
    id: fn() -> TypeId,
    name: fn() -> &'static str,
}

impl StateType {
    /// The state type `T`.
    pub const fn of<T: 'static>() -> Self {
        StateType {
            id: TypeId::of::<T>,
            name: std::any::type_name::<T>,
        }
    }

    /// The type's id.
    pub fn id(self) -> TypeId {
        (self.id)()
    }

    /// The type's name.
    pub fn name(self) -> &'static str {
        (self.name)()
    }
}

impl fmt::Debug for StateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
