//! The bridge to OpenTelemetry (feature `otel`), through `tracing-opentelemetry`: the trace
//! context read from the current span at dispatch, and an attempt's span tied to the context
//! its payload carries.

use opentelemetry::trace::{
    SpanContext, SpanId, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
};
use opentelemetry::KeyValue;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::payload::Payload;
use crate::trace::mode::TraceMode;
use crate::trace::names::{destination, MESSAGING_SYSTEM};
use crate::trace::w3c::TraceParent;

/// The trace context the code dispatching now runs in: the current `tracing` span's, else the
/// OpenTelemetry context attached to the thread. `None` when neither is a valid, recorded
/// context.
pub(super) fn current() -> Option<(TraceParent, Option<String>)> {
    let from_span = tracing::Span::current().context();
    let context = if from_span.span().span_context().is_valid() {
        from_span
    } else {
        opentelemetry::Context::current()
    };
    let span = context.span();
    let span_context = span.span_context();
    if !span_context.is_valid() {
        return None;
    }
    let parent = TraceParent::new(
        span_context.trace_id().to_bytes(),
        span_context.span_id().to_bytes(),
        span_context.trace_flags().to_u8(),
    )?;
    let state = span_context.trace_state().header();
    Some((parent, (!state.is_empty()).then_some(state)))
}

/// Ties the attempt span `span` (not entered yet) to the trace its payload carries, as `mode`
/// (asked only when the span is recorded) says, and names and describes it as OpenTelemetry's messaging conventions do. Does nothing
/// when no OpenTelemetry layer records `span`.
pub(super) fn continue_in(
    span: &tracing::Span,
    payload: &Payload,
    queue: &str,
    mode: impl FnOnce() -> TraceMode,
) {
    if span.is_disabled() {
        return; // no subscriber, or the span filtered out
    }
    let mode = mode();
    let dispatched = match mode {
        TraceMode::Ignore => None,
        TraceMode::Child | TraceMode::Link => remote_context(payload),
    };
    let parent = match (mode, &dispatched) {
        (TraceMode::Child, Some(remote)) => {
            opentelemetry::Context::new().with_remote_span_context(remote.clone())
        }
        // A root: not the child of whatever span the worker runs in.
        _ => opentelemetry::Context::new(),
    };
    if span.set_parent(parent).is_err() {
        return; // no OpenTelemetry layer
    }
    if let (TraceMode::Link, Some(remote)) = (mode, dispatched) {
        span.add_link(remote);
    }
    let destination = destination(queue);
    span.record("otel.name", format!("process {destination}"));
    span.record("otel.kind", "consumer");
    let attributes = [
        KeyValue::new("messaging.system", MESSAGING_SYSTEM),
        KeyValue::new("messaging.destination.name", destination),
        KeyValue::new("messaging.operation.type", "process"),
        KeyValue::new("messaging.operation.name", "process"),
        KeyValue::new("messaging.message.id", payload.uuid.to_string()),
        KeyValue::new("messaging.message.job_name", payload.display_name.clone()),
        KeyValue::new("messaging.message.attempts", i64::from(payload.attempts)),
        KeyValue::new("redjob.trace.mode", mode.as_str()),
    ];
    for attribute in attributes {
        span.set_attribute(attribute.key, attribute.value);
    }
    if let Some(max_tries) = payload.max_tries {
        span.set_attribute("messaging.message.max_tries", i64::from(max_tries));
    }
}

/// Records a failed attempt on its span: the error status, `error.type`, and an `exception`
/// event holding the message.
pub(super) fn record_error(span: &tracing::Span, kind: &'static str, message: &str) {
    span.set_attribute("error.type", kind);
    span.add_event(
        "exception",
        vec![
            KeyValue::new("exception.type", kind),
            KeyValue::new("exception.message", message.to_owned()),
        ],
    );
    span.set_status(Status::error(message.to_owned()));
}

/// The span context a payload's `traceparent` and `tracestate` describe; `None` when it has
/// no valid `traceparent`. A `tracestate` that does not parse is dropped, the parent kept.
fn remote_context(payload: &Payload) -> Option<SpanContext> {
    let parent: TraceParent = payload.traceparent.as_deref()?.parse().ok()?;
    let state = payload
        .tracestate
        .as_deref()
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        TraceId::from_bytes(parent.trace_id()),
        SpanId::from_bytes(parent.span_id()),
        TraceFlags::new(parent.flags()),
        true,
        state,
    ))
}
