//! The times operators give, on the command line and in the dashboard's searches.

use chrono::{DateTime, Utc};

/// A time given as RFC 3339, or as an age: a number followed by s, m, h or d.
pub(super) fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    let unit = |c: char| match c {
        's' => Some(1),
        'm' => Some(60),
        'h' => Some(3600),
        'd' => Some(86_400),
        _ => None,
    };
    let age = text
        .char_indices()
        .last()
        .and_then(|(at, c)| Some((text[..at].parse::<u64>().ok()?, unit(c)?)))
        .and_then(|(n, unit)| n.checked_mul(unit))
        .and_then(|secs| chrono::Duration::try_seconds(secs as i64));
    match age {
        Some(age) => Ok(Utc::now() - age),
        None => Err(format!(
            "expected RFC 3339 (2026-11-25T10:00:00Z) or an age such as 30m, 2h or 7d, not {text:?}"
        )),
    }
}
