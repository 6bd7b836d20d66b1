//! The counters a payload carries that workers change: `attempts` (raised by the pop script
//! at each reservation), `exceptions` (failed attempts, for `maxExceptions`), `requeues`
//! (times put back without counting an attempt), `interruptions` (times put back, its
//! attempt given back, by a worker that was stopping) and `unrunnableSince` (when a worker
//! first met the job and could not run it, in Unix seconds). None of them is signed.
//!
//! They sit together at the end of the payload,
//! `"exceptions":E,"requeues":R,"interruptions":I,"attempts":A`, the first three only once they
//! are not 0, so that the pop script finds `attempts` near the
//! end. A worker that puts a job back with changed counters writes a replacement copy with
//! these bytes rewritten and every other byte kept: scripts never decode JSON.

use super::attempts_digits;

/// A payload's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// How many times the job has been reserved.
    pub attempts: u32,
    /// How many attempts ended in an error, a panic or a timeout.
    pub exceptions: u32,
    /// How many times the job was put back without counting an attempt.
    pub requeues: u32,
    /// How many times a stopping worker put the job back, its attempt given back.
    pub interruptions: u32,
    /// When a worker first met the job and could not run it (a type it does not link, data
    /// it cannot decode), in Unix seconds; 0 while none has.
    pub unrunnable_since: u32,
}

/// The counters written before `attempts`, in the order they are written.
const BEFORE_ATTEMPTS: [&str; 4] = ["exceptions", "requeues", "interruptions", "unrunnableSince"];

/// Where the counters are in `raw`, and their values.
struct Located {
    /// Where the first counter (or the attempts key) starts.
    start: usize,
    /// Where the attempts key starts: it and what follows it up to the digits are kept.
    attempts_key: usize,
    /// The attempts digits.
    digits: std::ops::Range<usize>,
    counters: Counters,
}

/// Where the counters are in `raw`, and their values.
fn locate(raw: &str) -> Option<Located> {
    let digits = attempts_digits(raw)?;
    let mut counters = Counters {
        attempts: raw[digits.clone()].parse().ok()?,
        ..Counters::default()
    };
    let attempts_key = raw[..digits.start].rfind("\"attempts\"")?;
    let mut start = attempts_key;
    // Walk back over `"name":N,` fields written just before it.
    loop {
        let before = &raw[..start];
        let Some(field) = before.strip_suffix(',') else {
            break;
        };
        let digits_start = field.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let Ok(value) = field[digits_start..].parse::<u32>() else {
            break;
        };
        let key_end = &field[..digits_start];
        let Some(name) = BEFORE_ATTEMPTS
            .iter()
            .find(|name| key_end.ends_with(&format!("\"{name}\":")))
        else {
            break;
        };
        match *name {
            "exceptions" => counters.exceptions = value,
            "requeues" => counters.requeues = value,
            "interruptions" => counters.interruptions = value,
            _ => counters.unrunnable_since = value,
        }
        start = digits_start - name.len() - 3;
    }
    Some(Located {
        start,
        attempts_key,
        digits,
        counters,
    })
}

/// The counters of a payload (`None` when it has no top-level `attempts`).
///
/// ```
/// use redjob::payload::counters::{counters, Counters};
/// let raw = r#"{"data":{"requeues":9},"id":"x","requeues":2,"attempts":3,"delay":null}"#;
/// let expected = Counters { attempts: 3, requeues: 2, ..Counters::default() };
/// assert_eq!(counters(raw), Some(expected));
/// ```
pub fn counters(raw: &str) -> Option<Counters> {
    locate(raw).map(|located| located.counters)
}

/// `raw` with its counters set to `counters`, every other byte kept, the attempts key as it
/// was written included (`None` when it has no top-level `attempts`).
///
/// ```
/// use redjob::payload::counters::{with_counters, Counters};
/// let raw = r#"{"id":"x","attempts":3,"delay":null}"#;
/// let set = Counters { attempts: 2, exceptions: 1, requeues: 4, ..Counters::default() };
/// let written = with_counters(raw, set).unwrap();
/// assert_eq!(written, r#"{"id":"x","exceptions":1,"requeues":4,"attempts":2,"delay":null}"#);
/// let reset = Counters { attempts: 0, ..Default::default() };
/// assert_eq!(with_counters(&written, reset).unwrap(), r#"{"id":"x","attempts":0,"delay":null}"#);
/// ```
pub fn with_counters(raw: &str, counters: Counters) -> Option<String> {
    let located = locate(raw)?;
    let mut fields = String::new();
    for (name, value) in [
        ("exceptions", counters.exceptions),
        ("requeues", counters.requeues),
        ("interruptions", counters.interruptions),
        ("unrunnableSince", counters.unrunnable_since),
    ] {
        if value > 0 {
            fields.push_str(&format!("\"{name}\":{value},"));
        }
    }
    Some(format!(
        "{}{fields}{}{}{}",
        &raw[..located.start],
        &raw[located.attempts_key..located.digits.start],
        counters.attempts,
        &raw[located.digits.end..]
    ))
}

/// The payload to put back for a reserved copy requeued without counting its attempt:
/// `attempts` one lower and `requeues` one higher.
///
/// ```
/// let reserved = r#"{"id":"x","attempts":3,"delay":null}"#;
/// let once = redjob::payload::counters::requeued(reserved).unwrap();
/// assert_eq!(once, r#"{"id":"x","requeues":1,"attempts":2,"delay":null}"#);
/// ```
pub fn requeued(raw: &str) -> Option<String> {
    given_back(raw, |c| c.requeues += 1)
}

/// The payload to put back for a reserved copy whose worker was stopping: `attempts` one
/// lower, as before its reservation, and `interruptions` one higher.
///
/// ```
/// let reserved = r#"{"id":"x","attempts":1,"delay":null}"#;
/// let once = redjob::payload::counters::interrupted(reserved).unwrap();
/// assert_eq!(once, r#"{"id":"x","interruptions":1,"attempts":0,"delay":null}"#);
/// ```
pub fn interrupted(raw: &str) -> Option<String> {
    given_back(raw, |c| c.interruptions += 1)
}

/// The payload to put back for a reserved copy that this worker cannot run, at Unix time
/// `now`: `attempts` one lower, as before its reservation, and `unrunnableSince` set to `now`
/// unless a worker met it before.
///
/// ```
/// let reserved = r#"{"id":"x","attempts":1}"#;
/// let once = redjob::payload::counters::unrunnable(reserved, 1_800_000_000).unwrap();
/// assert_eq!(once, r#"{"id":"x","unrunnableSince":1800000000,"attempts":0}"#);
/// let again = redjob::payload::with_attempts(&once, 1).unwrap();
/// let twice = redjob::payload::counters::unrunnable(&again, 1_800_000_060).unwrap();
/// assert_eq!(twice, once, "the first meeting is kept");
/// ```
pub fn unrunnable(raw: &str, now: u32) -> Option<String> {
    given_back(raw, |c| {
        if c.unrunnable_since == 0 {
            c.unrunnable_since = now;
        }
    })
}

/// `raw` with its attempt given back (`attempts` one lower, as before its reservation) and
/// `note` applied to its other counters.
fn given_back(raw: &str, note: impl FnOnce(&mut Counters)) -> Option<String> {
    let mut c = counters(raw)?;
    c.attempts = c.attempts.saturating_sub(1);
    note(&mut c);
    with_counters(raw, c)
}

/// The payload to put back for a reserved copy released after a failed attempt: `exceptions`
/// one higher.
pub fn after_exception(raw: &str) -> Option<String> {
    let c = counters(raw)?;
    with_counters(
        raw,
        Counters {
            exceptions: c.exceptions + 1,
            ..c
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_and_data_fields_of_the_same_name_are_left_alone() {
        let raw = r#"{"data":{"exceptions":5,"requeues":6},"id":"x","attempts":1}"#;
        assert_eq!(
            counters(raw).unwrap(),
            Counters {
                attempts: 1,
                ..Default::default()
            }
        );
        let once = after_exception(raw).unwrap();
        let twice = requeued(&after_exception(&once).unwrap()).unwrap();
        assert_eq!(
            twice,
            r#"{"data":{"exceptions":5,"requeues":6},"id":"x","exceptions":2,"requeues":1,"attempts":0}"#
        );
        let payload = crate::payload::Payload::from_json(
            r#"{"uuid":"9f0c1d57-7d6a-4c3b-9a55-0b1c8f6e2a10","displayName":"J","job":"J","maxTries":null,"maxExceptions":null,"backoff":null,"timeout":null,"retryUntil":null,"data":{},"id":"x","exceptions":2,"requeues":1,"attempts":0}"#,
        )
        .unwrap();
        assert_eq!((payload.exceptions, payload.requeues), (2, 1));
        assert_eq!(counters("not json"), None);
        let spaced = r#"{"id":"x","attempts" : 3}"#;
        assert_eq!(
            after_exception(spaced).unwrap(),
            r#"{"id":"x","exceptions":1,"attempts" : 3}"#
        );
    }
}
