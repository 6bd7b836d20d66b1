//! The job payload: the one JSON document that travels through Redis.

pub mod backoff;
pub mod counters;
pub mod delay;
pub mod encrypted;
pub mod failed;
pub mod laravel;
pub mod log_context;
pub mod php;
pub mod signing;
pub mod unique;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::payload::backoff::Backoff;
pub use crate::payload::log_context::LogContext;
use crate::payload::unique::UniqueLock;

/// A job as stored in Redis, field for field and in the order of Laravel's Redis payload.
///
/// Unset options are left out rather than written as `null` (and `failOnTimeout` when it is
/// false): Laravel reads each of them with `?? null` (`?? false`), and a waiting job costs
/// Redis fewer bytes. Payloads that hold them as `null`, as Laravel writes them, read the same.
/// A signed payload also has a `signature` field. `attempts` is 0 when pushed and raised by one each time a worker
/// reserves the job; the reserved copy differs from the pushed payload only in that number.
///
/// ```
/// use redjob::Payload;
/// let json = r#"{"uuid":"9f0c1d57-7d6a-4c3b-9a55-0b1c8f6e2a10","displayName":"SendInvoice",
///   "job":"SendInvoice","maxTries":3,"maxExceptions":null,"failOnTimeout":false,
///   "backoff":"1,5,10","timeout":null,"retryUntil":null,"data":{"id":7},
///   "createdAt":1763769600,"id":"9f0c1d577d6a4c3b9a550b1c8f6e2a10","attempts":0,"delay":null}"#;
/// let payload = Payload::from_json(json).unwrap();
/// assert_eq!(payload.job, "SendInvoice");
/// assert_eq!(payload.backoff().unwrap().seconds(), [1, 5, 10]);
/// assert_eq!(payload.data.get(), r#"{"id":7}"#);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    /// Unique id of this dispatch; also the key of its failed-job record.
    pub uuid: Uuid,
    /// Name shown in logs and tools; the job name unless the job sets another.
    pub display_name: String,
    /// The registered job type name that workers look up.
    pub job: String,
    /// Attempts allowed before the job fails (0: unlimited; absent or null: the worker's
    /// `--tries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tries: Option<u32>,
    /// Handled errors allowed before the job fails (absent or null: no such limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_exceptions: Option<u32>,
    /// Whether a timeout fails the job at once instead of retrying it (absent or null:
    /// false).
    #[serde(
        default,
        deserialize_with = "null_as_false",
        skip_serializing_if = "is_false"
    )]
    pub fail_on_timeout: bool,
    /// Seconds to wait before each retry, as Laravel writes them: `"1,5,10"` (absent or
    /// null: the worker's `--backoff`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// Seconds the handler may run (absent or null: the worker's `--timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Unix time after which the job is no longer retried (absent or null: no such limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_until: Option<i64>,
    /// The job struct, serialized.
    pub data: Box<RawValue>,
    /// Unix time of the dispatch (absent from what Laravel before 11 writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// The unique lock of a unique job (see [`crate::payload::unique`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique: Option<UniqueLock>,
    /// Names of middleware the dispatch asked for ([`crate::middleware::define`]), run
    /// inside the job type's own; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub through: Vec<String>,
    /// The job's tags, for operators to find it by; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The chain the job is a link of (see [`crate::workflow`]): the uuid of the chain's first
    /// job; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Uuid>,
    /// The batch the job belongs to (see [`crate::workflow::Batch`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Uuid>,
    /// The batch this job is a callback of (`then`, `catch` or `finally`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_of: Option<Uuid>,
    /// For a tracked job (see [`crate::status`]): the seconds its outcome is kept after it
    /// settles; absent otherwise. Not signed: it says only how long a record is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<u64>,
    /// The group of its queue the job waits in ([fair groups](crate::groups)); absent for a
    /// job of the queue's own list, the only kind Laravel's workers see. Not signed: it says
    /// where the job waits, not what it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The W3C trace context the job was dispatched in (see [`crate::trace`]), the key
    /// Laravel's OpenTelemetry package writes; absent without one. Not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The W3C `tracestate` of that context, when not empty. Not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// Laravel's Context (Laravel 11 and later) as a dispatch passed it on: `data` and
    /// `hidden`, each value written by PHP's `serialize()` (see [`LogContext`]); absent when
    /// empty.
    #[serde(
        rename = "illuminate:log:context",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_context: Option<LogContext>,
    /// Redis-specific random id (32 hex digits).
    pub id: String,
    /// The HMAC-SHA256 signature of the payload, when it was pushed through a handle with a
    /// signing key (see [`crate::payload::signing`]); absent from the JSON otherwise. It comes before
    /// `attempts`, so that the pop script finds that number near the end of the payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// How many attempts ended in an error, a panic or a timeout, for `maxExceptions`;
    /// absent while 0. Not signed: the worker raises it (see [`counters`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exceptions: u32,
    /// How many times the job was put back without counting an attempt (a limit or a lock
    /// that was busy); absent while 0. Not signed: the worker raises it (see [`counters`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requeues: u32,
    /// How many times a stopping worker put the job back, its attempt given back; absent while
    /// 0. Not signed: the worker raises it (see [`counters`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interruptions: u32,
    /// When a worker first met the job and could not run it (a type it does not link, data it
    /// cannot decode), in Unix seconds; absent until then. The job waits for a worker that
    /// can, its attempts given back, until the worker's `--unknown-job-grace` after this.
    /// Not signed: the worker sets it (see [`counters`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unrunnable_since: u32,
    /// How many times the job has been reserved.
    pub attempts: u32,
    /// The delay given at dispatch, in seconds; absent (or null) when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<serde_json::Number>,
}

/// The workflows a job belongs to, by id, as its payload names them. The worker copies them
/// onto the job's context, where the workflow capability reads them: a job of a batch whose
/// handler adds nothing keeps no workflow state of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkflowIds {
    /// The chain the job is a link of ([`Payload::chain`]).
    pub chain: Option<Uuid>,
    /// The batch the job belongs to ([`Payload::batch`]).
    pub batch: Option<Uuid>,
    /// The batch the job is a callback of ([`Payload::callback_of`]).
    pub callback_of: Option<Uuid>,
}

impl Payload {
    /// The workflows the job belongs to.
    pub fn workflow_ids(&self) -> WorkflowIds {
        WorkflowIds {
            chain: self.chain,
            batch: self.batch,
            callback_of: self.callback_of,
        }
    }

    /// Parses a payload, as read from Redis.
    pub fn from_json(json: &str) -> Result<Payload, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The payload as the JSON string stored in Redis.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a payload always serializes")
    }

    /// The backoff list, when the payload has one.
    pub fn backoff(&self) -> Option<Backoff> {
        self.backoff.as_deref().and_then(|b| b.parse().ok())
    }

    /// When the job was dispatched.
    pub fn created_at(&self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(self.created_at?, 0)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

/// `null` read as `false`, as Laravel's payloads may hold it.
fn null_as_false<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(deserializer)?.unwrap_or(false))
}

/// The raw payload with its top-level `attempts` set to `attempts`, every other byte kept.
///
/// The top-level field is the last `"attempts"` key followed by a colon and digits (only
/// `delay` follows it in a payload), the same rule the pop script uses to raise it. Returns
/// `None` when the payload has no such field.
///
/// ```
/// let reserved = r#"{"data":{"attempts":9},"id":"x","attempts": 3,"delay":null}"#;
/// assert_eq!(
///     redjob::payload::with_attempts(reserved, 2).unwrap(),
///     r#"{"data":{"attempts":9},"id":"x","attempts": 2,"delay":null}"#
/// );
/// ```
pub fn with_attempts(raw: &str, attempts: u32) -> Option<String> {
    let digits = attempts_digits(raw)?;
    Some(format!(
        "{}{attempts}{}",
        &raw[..digits.start],
        &raw[digits.end..]
    ))
}

/// A reserved copy as it was before its reservation: `attempts` one lower. A payload without
/// a top-level `attempts` (one that is not JSON, say) is returned unchanged.
///
/// Failed-job records keep this form, so that retrying one starts from its pushed count.
pub fn unreserved(raw: &str) -> std::borrow::Cow<'_, str> {
    attempts_digits(raw)
        .and_then(|digits| raw[digits].parse::<u32>().ok())
        .and_then(|attempts| with_attempts(raw, attempts.saturating_sub(1)))
        .map_or(std::borrow::Cow::Borrowed(raw), std::borrow::Cow::Owned)
}

/// The byte range of the top-level attempts number: the last `"attempts"` key followed by
/// optional white space, a colon, optional white space and digits.
pub(crate) fn attempts_digits(raw: &str) -> Option<std::ops::Range<usize>> {
    const KEY: &str = "\"attempts\"";
    raw.rmatch_indices(KEY).find_map(|(at, _)| {
        let rest = &raw[at + KEY.len()..];
        let after_key = rest.trim_start();
        let after_colon = after_key.strip_prefix(':')?.trim_start();
        let start = raw.len() - after_colon.len();
        let len = after_colon.bytes().take_while(u8::is_ascii_digit).count();
        (len > 0).then_some(start..start + len)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreserved_lowers_the_top_level_attempts_only() {
        let raw = r#"{"data":{"attempts":9},"attempts":3,"delay":null}"#;
        assert_eq!(
            unreserved(raw),
            r#"{"data":{"attempts":9},"attempts":2,"delay":null}"#
        );
        assert_eq!(unreserved("not json"), "not json");
    }

    #[test]
    fn a_key_without_digits_is_skipped_for_an_earlier_one() {
        let raw = r#"{"attempts":4,"x":{"attempts":null}}"#;
        assert_eq!(
            with_attempts(raw, 5).unwrap(),
            r#"{"attempts":5,"x":{"attempts":null}}"#
        );
    }
}

/// A payload read leniently, field by field, for reporting on one that may not decode as a
/// [`Payload`]: any field may be missing, and the text need not be JSON at all.
///
/// ```
/// let raw = redjob::payload::RawFields::parse(r#"{"job":"mail","attempts":2}"#);
/// assert!(raw.is_json());
/// assert_eq!(raw.text("job").as_deref(), Some("mail"));
/// assert_eq!(raw.number("attempts"), Some(2));
/// assert_eq!(raw.text("uuid"), None);
/// ```
#[derive(Debug, Clone)]
pub struct RawFields {
    value: Option<serde_json::Value>,
}

impl RawFields {
    /// Reads `raw`, which may be anything.
    pub fn parse(raw: &str) -> RawFields {
        RawFields {
            value: serde_json::from_str(raw).ok(),
        }
    }

    /// Whether `raw` was JSON.
    pub fn is_json(&self) -> bool {
        self.value.is_some()
    }

    /// The top-level field `name`, when it is a string.
    pub fn text(&self, name: &str) -> Option<String> {
        self.field(name)?.as_str().map(str::to_owned)
    }

    /// The strings of the top-level field `name`, when it is an array (others are skipped);
    /// empty otherwise.
    pub fn texts(&self, name: &str) -> Vec<String> {
        self.field(name)
            .and_then(|v| v.as_array())
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The top-level field `name`, when it is a whole number.
    pub fn number(&self, name: &str) -> Option<u64> {
        self.field(name)?.as_u64()
    }

    fn field(&self, name: &str) -> Option<&serde_json::Value> {
        self.value.as_ref()?.get(name)
    }
}

/// The bytes of a hexadecimal string (either case), or `None` when it is not one.
pub(crate) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}
