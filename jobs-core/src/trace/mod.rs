//! Traces across the queue: W3C trace context from the code that dispatches a job to every
//! attempt that runs it, in Rust and Laravel alike.
//!
//! With the feature `otel` and a `tracing-opentelemetry` layer installed, a dispatch writes
//! the trace context of the span it runs in into the payload, as the top-level keys
//! `traceparent` and `tracestate` (when not empty), the keys Laravel's OpenTelemetry package
//! writes and reads. A plain dispatch runs in a `send queues:<name>` span of its own (kind
//! producer), so its job's parent is that span. A worker's attempt span (`process
//! queues:<name>`, kind consumer) then continues the trace as its [`TraceMode`] says.
//! Without the feature, or without a valid context, the payload is byte for byte what it
//! would be without this module, and a worker ignores the keys.
//!
//! The keys are not covered by a payload's signature ([`crate::payload::signing`]): they say
//! where a job came from, never what it does, and whatever relays a payload may rewrite them.
//! `docs/tracing.md` has the setup, the span attributes, and how retries, chains, batches,
//! schedules and the outbox carry the context.

pub(crate) mod attempt;
mod mode;
#[cfg(feature = "otel")]
mod names;
#[cfg(feature = "otel")]
mod otel;
mod w3c;

pub use mode::{mode_for, TraceMode, UnknownTraceMode, LINK_AFTER_SECONDS};
pub use w3c::{InvalidTraceParent, TraceParent};

use crate::payload::Payload;
#[cfg(feature = "otel")]
use names::{destination, MESSAGING_SYSTEM};

/// Writes the trace context of the code dispatching now into `payload`; leaves it as it is
/// when there is none, or without the feature `otel`.
pub(crate) fn stamp(payload: &mut Payload) {
    #[cfg(feature = "otel")]
    if let Some((parent, state)) = otel::current() {
        payload.traceparent = Some(parent.to_string());
        payload.tracestate = state;
    }
    #[cfg(not(feature = "otel"))]
    let _ = payload;
}

/// The span a push of `jobs` jobs to `queue` runs in (kind producer), `operation` being
/// `push`, `later` or `bulk`; a disabled span without the feature `otel`. The queue's name is
/// asked for only when the span is recorded.
pub(crate) fn send_span<'q>(
    queue: impl FnOnce() -> &'q str,
    operation: &'static str,
    jobs: usize,
) -> tracing::Span {
    #[cfg(feature = "otel")]
    {
        use tracing::field::Empty;
        let span = tracing::info_span!(
            "send",
            otel.name = Empty,
            otel.kind = "producer",
            messaging.system = MESSAGING_SYSTEM,
            messaging.destination.name = Empty,
            messaging.operation.type = "send",
            messaging.operation.name = operation,
            messaging.batch.message_count = jobs,
        );
        if !span.is_disabled() {
            let destination = destination(queue());
            span.record("otel.name", format!("send {destination}"));
            span.record("messaging.destination.name", destination);
        }
        span
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (queue, operation, jobs);
        tracing::Span::none()
    }
}
