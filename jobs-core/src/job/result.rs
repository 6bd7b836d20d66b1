//! What a handler returns: [`JobResult`], and [`JobError`] for a failed attempt.

use std::fmt;

/// What a handler returns: its job's [`Output`](crate::Job::Output) (`()` for most jobs), or
/// the error of a failed attempt.
pub type JobResult<T = ()> = Result<T, JobError>;

/// The error of a failed attempt. Any `std::error::Error`, a `String` or a `&str` converts into
/// it, so handlers can use `?` and `Err("reason".into())`.
pub struct JobError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl JobError {
    /// An error with a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        JobError(message.to_string().into())
    }

    /// The underlying error.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for JobError {
    fn from(err: E) -> Self {
        JobError(err.into())
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}
