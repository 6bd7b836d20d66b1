//! How a job's attempt relates to the trace it was dispatched in.

use std::fmt;
use std::str::FromStr;

use crate::payload::Payload;

/// A job started this long after its dispatch is linked to its dispatch's trace rather than
/// made a child of it: tail-sampling collectors close a trace within minutes, and a trace
/// that spans hours shows as one bar with a gap.
pub const LINK_AFTER_SECONDS: i64 = 3600;

/// How an attempt's span relates to the trace context its payload carries.
///
/// Set per job type with `#[job(trace = "child" | "link" | "ignore")]`, per worker with
/// `--trace` ([`mode_for`] says which wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceMode {
    /// The attempt's span is a child of the dispatch's span: one trace from the request to the
    /// jobs it caused.
    Child,
    /// The attempt starts a trace of its own, linked to the dispatch's span: for fan-out, where
    /// one request's trace would otherwise hold thousands of jobs.
    Link,
    /// The attempt starts a trace of its own and ignores the dispatch's.
    Ignore,
}

impl TraceMode {
    /// The name the job attribute and the worker's `--trace` take.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceMode::Child => "child",
            TraceMode::Link => "link",
            TraceMode::Ignore => "ignore",
        }
    }
}

impl fmt::Display for TraceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`TraceMode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace mode {0:?}: expected child, link or ignore")]
pub struct UnknownTraceMode(pub String);

impl FromStr for TraceMode {
    type Err = UnknownTraceMode;

    fn from_str(name: &str) -> Result<TraceMode, UnknownTraceMode> {
        match name {
            "child" => Ok(TraceMode::Child),
            "link" => Ok(TraceMode::Link),
            "ignore" => Ok(TraceMode::Ignore),
            other => Err(UnknownTraceMode(other.to_owned())),
        }
    }
}

/// The mode an attempt of `payload`, started at unix time `now`, runs in: the job type's
/// (`job`), else the worker's (`worker`), else [`TraceMode::Link`] for a job of a batch and
/// for a job started [`LINK_AFTER_SECONDS`] or more after its dispatch, else
/// [`TraceMode::Child`].
///
/// ```
/// use redjob::trace::{mode_for, TraceMode};
/// # let payload = redjob::Payload::from_json(r#"{"uuid":"9f0c1d57-7d6a-4c3b-9a55-0b1c8f6e2a10",
/// #   "displayName":"A","job":"A","data":{},"createdAt":1000,"id":"x","attempts":1}"#).unwrap();
/// assert_eq!(mode_for(None, None, &payload, 1060), TraceMode::Child);
/// assert_eq!(mode_for(None, None, &payload, 1000 + 3600), TraceMode::Link);
/// assert_eq!(mode_for(Some(TraceMode::Child), Some(TraceMode::Ignore), &payload, 1000 + 3600), TraceMode::Child);
/// assert_eq!(mode_for(None, Some(TraceMode::Ignore), &payload, 1060), TraceMode::Ignore);
/// ```
pub fn mode_for(
    job: Option<TraceMode>,
    worker: Option<TraceMode>,
    payload: &Payload,
    now: i64,
) -> TraceMode {
    job.or(worker).unwrap_or_else(|| {
        let late = payload
            .created_at
            .is_some_and(|created| now - created >= LINK_AFTER_SECONDS);
        if payload.batch.is_some() || late {
            TraceMode::Link
        } else {
            TraceMode::Child
        }
    })
}
