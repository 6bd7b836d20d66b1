//! W3C Trace Context's `traceparent` header, as a payload carries it: read strictly, written
//! in version 00.

use std::fmt;
use std::str::FromStr;

/// A `traceparent` value: `00-<trace id, 32 hex>-<parent span id, 16 hex>-<flags, 2 hex>`.
///
/// Read as the W3C recommendation says: lowercase hex only, neither id all zeros, version
/// `ff` refused, and a later version read by its first four fields. Anything else is not a
/// trace parent, and a job that carries one runs as if it carried none.
///
/// ```
/// use redjob::trace::TraceParent;
///
/// let parent: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap();
/// assert_eq!(parent.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(parent.sampled());
/// assert_eq!(parent.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
/// assert!("00-00000000000000000000000000000000-00f067aa0ba902b7-01".parse::<TraceParent>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

/// Why a text is not a `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a W3C traceparent: {0}")]
pub struct InvalidTraceParent(&'static str);

impl TraceParent {
    /// A trace parent of these ids and flags; `None` when either id is all zeros.
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> Option<TraceParent> {
        let zero = |bytes: &[u8]| bytes.iter().all(|b| *b == 0);
        (!zero(&trace_id) && !zero(&span_id)).then_some(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }

    /// The trace's id.
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The trace's id, as 32 lowercase hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The id of the span the job was dispatched in.
    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// The id of the span the job was dispatched in, as 16 lowercase hex digits.
    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// The trace flags.
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Whether the dispatching side recorded its span (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

impl FromStr for TraceParent {
    type Err = InvalidTraceParent;

    fn from_str(text: &str) -> Result<TraceParent, InvalidTraceParent> {
        let mut fields = text.split('-');
        let mut next = |what| fields.next().ok_or(InvalidTraceParent(what));
        let version = lower_hex::<1>(next("no version")?).ok_or(InvalidTraceParent("version"))?;
        let trace_id =
            lower_hex::<16>(next("no trace id")?).ok_or(InvalidTraceParent("trace id"))?;
        let span_id = lower_hex::<8>(next("no span id")?).ok_or(InvalidTraceParent("span id"))?;
        let flags = lower_hex::<1>(next("no flags")?).ok_or(InvalidTraceParent("flags"))?;
        match version[0] {
            0xff => return Err(InvalidTraceParent("version ff")),
            // Version 00 has exactly four fields; a later one may append more.
            0 if fields.next().is_some() => return Err(InvalidTraceParent("trailing fields")),
            _ => {}
        }
        TraceParent::new(trace_id, span_id, flags[0]).ok_or(InvalidTraceParent("an id of zeros"))
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.span_id),
            self.flags
        )
    }
}

/// `N` bytes written as exactly `2N` lowercase hex digits.
fn lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let digit = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut bytes = [0; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn reads_and_writes_version_00() {
        let parent: TraceParent = VALID.parse().unwrap();
        assert_eq!(parent.span_id_hex(), "00f067aa0ba902b7");
        assert_eq!(parent.flags(), 1);
        assert_eq!(parent.to_string(), VALID);
    }

    #[test]
    fn refuses_what_the_recommendation_refuses() {
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            assert!(bad.parse::<TraceParent>().is_err(), "{bad:?} was read");
        }
    }

    #[test]
    fn reads_a_later_version_by_its_first_four_fields() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-what-comes-next";
        let parent: TraceParent = later.parse().unwrap();
        assert_eq!(
            parent.to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"
        );
    }
}
