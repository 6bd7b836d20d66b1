//! Export of the worker's spans to an OpenTelemetry collector over OTLP/HTTP (feature `otel`),
//! set up from OpenTelemetry's standard environment variables.
//!
//! Nothing is exported unless `OTEL_EXPORTER_OTLP_ENDPOINT` (for example
//! `http://127.0.0.1:4318`) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, ending in
//! `/v1/traces`) is set. The service is named by `OTEL_SERVICE_NAME`, else by a `service.name`
//! in `OTEL_RESOURCE_ATTRIBUTES`, which adds to its resource, else `redjob-worker`. Spans leave
//! in batches from a thread of their own; [`crate::logging::flush`] sends what is left.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::sync::OnceLock;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

/// The service name when the environment gives none.
const DEFAULT_SERVICE_NAME: &str = "redjob-worker";

/// The provider spans are exported through, once set up; kept for the flush at exit.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The layer that records spans for export, when an OTLP endpoint is configured. Also makes
/// W3C trace context the process's propagator, for the HTTP clients handlers use.
pub(crate) fn layer<S>() -> Option<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
    if !configured {
        return None;
    }
    if std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").is_ok_and(|p| p != "http/protobuf") {
        eprintln!("worker: OTEL_EXPORTER_OTLP_PROTOCOL is not http/protobuf; spans are exported over http/protobuf");
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(err) => {
            eprintln!("worker: cannot export spans over OTLP: {err}");
            return None;
        }
    };
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, as the SDK reads them; where neither
    // names the service, the SDK's `unknown_service:<program>` becomes ours.
    let mut resource = opentelemetry_sdk::Resource::builder().build();
    let named = resource
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if !named {
        resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(DEFAULT_SERVICE_NAME)
            .build();
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("redjob-worker");
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let _ = PROVIDER.set(provider);
    Some(tracing_opentelemetry::layer().with_tracer(tracer))
}

/// Exports the spans still waiting, and stops exporting.
pub(crate) fn flush() {
    if let Some(provider) = PROVIDER.get() {
        if let Err(err) = provider.shutdown() {
            eprintln!("worker: exporting the last spans failed: {err}");
        }
    }
}
