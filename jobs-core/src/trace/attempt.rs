//! A worker's side: an attempt's span tied to the trace its payload carries, and its failure
//! recorded there. Reached through `redjob::__worker::trace`.

use crate::payload::Payload;
use crate::trace::mode::TraceMode;
#[cfg(feature = "otel")]
use crate::trace::otel;

/// Ties a worker's attempt span, not yet entered, to the trace its payload carries, as `mode`
/// says, and names it `process queues:<name>` with the messaging attributes. The span must
/// declare the fields `otel.name` and `otel.kind` (empty). Without the feature `otel`, or
/// when `span` is disabled, it does nothing, and `mode` is not asked.
pub fn continue_trace(
    span: &tracing::Span,
    payload: &Payload,
    queue: &str,
    mode: impl FnOnce() -> TraceMode,
) {
    #[cfg(feature = "otel")]
    otel::continue_in(span, payload, queue, mode);
    #[cfg(not(feature = "otel"))]
    let _ = (span, payload, queue, mode);
}

/// Records a failed attempt on its span: error status, `error.type` `kind` (`error`, `panic`,
/// `timeout`, ...) and an `exception` event with `message`. Without the feature `otel`, or
/// without an OpenTelemetry layer, it does nothing.
pub fn record_error(span: &tracing::Span, kind: &'static str, message: &str) {
    #[cfg(feature = "otel")]
    otel::record_error(span, kind, message);
    #[cfg(not(feature = "otel"))]
    let _ = (span, kind, message);
}
