//! OpenTelemetry for the tracing tests: an OTLP/HTTP receiver of their own, which decodes
//! each export with the protocol's own types, and an export from the test process to it.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_sdk::trace::SdkTracerProvider;
use prost::Message;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

use crate::wait::wait_for;
use crate::worker_process::WorkerProcess;
use crate::TestRedis;
use std::future::Future;

/// One span as the receiver got it: ids in lowercase hex, the parent's empty for a root.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The `service.name` of the process that exported it.
    pub service: String,
    /// The span's name.
    pub name: String,
    /// Its trace's id.
    pub trace_id: String,
    /// Its id.
    pub span_id: String,
    /// Its parent's id, empty for a root.
    pub parent_span_id: String,
    /// Its kind, as OTLP numbers it (4 producer, 5 consumer).
    pub kind: i32,
    /// Its attributes, as JSON values.
    pub attributes: BTreeMap<String, serde_json::Value>,
    /// Its status code (0 unset, 1 ok, 2 error).
    pub status_code: i32,
    /// Its events: name and attributes.
    pub events: Vec<(String, BTreeMap<String, serde_json::Value>)>,
    /// The spans it links to: trace id and span id.
    pub links: Vec<(String, String)>,
}

impl ReceivedSpan {
    /// The attribute `key`, as text (numbers and booleans written out).
    pub fn attribute(&self, key: &str) -> Option<String> {
        self.attributes.get(key).map(|value| match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }
}

/// An OTLP/HTTP trace receiver on a free loopback port, serving from a thread of its own
/// until dropped.
pub struct OtlpReceiver {
    port: u16,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl OtlpReceiver {
    /// Starts a receiver.
    pub fn start() -> OtlpReceiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let received = spans.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the receiver");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
                let app = axum::Router::new().route(
                    "/v1/traces",
                    axum::routing::post(move |body: axum::body::Bytes| {
                        let received = received.clone();
                        async move { export(&received, &body) }
                    }),
                );
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        OtlpReceiver {
            port,
            spans,
            stop: Some(stop),
        }
    }

    /// The endpoint to give as `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The spans named `name` once there are `count` of them; panics, naming the caller,
    /// after 30 s.
    #[track_caller]
    pub fn wait_for_named<'a>(
        &'a self,
        name: &'a str,
        count: usize,
    ) -> impl Future<Output = Vec<ReceivedSpan>> + 'a {
        let what = format!("{count} spans named {name:?}");
        wait_for(Duration::from_secs(30), what, move || async move {
            let named: Vec<_> = self
                .spans()
                .into_iter()
                .filter(|s| s.name == name)
                .collect();
            (named.len() >= count).then_some(named)
        })
    }

    /// Starts the worker `program` (integration tests pass
    /// `env!("CARGO_BIN_EXE_test_worker")`) on `redis` with `args`, exporting its spans here.
    pub fn exporting_worker(
        &self,
        program: &str,
        redis: &TestRedis,
        args: &[&str],
    ) -> WorkerProcess {
        let endpoint = self.endpoint();
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
        WorkerProcess::start_with_env(program, redis.url(), args, &env)
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Takes one export request: its spans kept, the protocol's empty answer returned.
fn export(
    received: &Mutex<Vec<ReceivedSpan>>,
    body: &[u8],
) -> (
    axum::http::StatusCode,
    [(&'static str, &'static str); 1],
    Vec<u8>,
) {
    let content_type = [("content-type", "application/x-protobuf")];
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            content_type,
            Vec::new(),
        );
    };
    let mut spans = received.lock().unwrap_or_else(|e| e.into_inner());
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        let service = match resource.get("service.name") {
            Some(serde_json::Value::String(name)) => name.clone(),
            _ => String::new(),
        };
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                spans.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    attributes: attributes(&span.attributes),
                    status_code: span.status.map_or(0, |status| status.code),
                    events: span
                        .events
                        .into_iter()
                        .map(|event| (event.name, attributes(&event.attributes)))
                        .collect(),
                    links: span
                        .links
                        .into_iter()
                        .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
                        .collect(),
                });
            }
        }
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    (axum::http::StatusCode::OK, content_type, answer)
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, serde_json::Value> {
    list.iter()
        .map(|pair| {
            let value = match pair.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(text)) => serde_json::json!(text),
                Some(AnyValue::IntValue(n)) => serde_json::json!(n),
                Some(AnyValue::BoolValue(b)) => serde_json::json!(b),
                Some(AnyValue::DoubleValue(x)) => serde_json::json!(x),
                other => serde_json::json!(format!("{other:?}")),
            };
            (pair.key.clone(), value)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The test process's spans, exported over OTLP/HTTP as service `service`: while it lives,
/// spans made on this thread are recorded (a `tracing-opentelemetry` layer as this thread's
/// subscriber).
pub struct Exporting {
    provider: SdkTracerProvider,
    _subscriber: tracing::subscriber::DefaultGuard,
}

impl Exporting {
    /// Exports to `receiver`.
    pub fn to(receiver: &OtlpReceiver, service: &str) -> Exporting {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{}/v1/traces", receiver.endpoint()))
            .build()
            .expect("an OTLP exporter");
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service.to_owned())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("tests"));
        let subscriber = tracing_subscriber::registry().with(layer);
        Exporting {
            provider,
            _subscriber: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Sends the spans ended so far.
    pub async fn flush(&self) {
        let provider = self.provider.clone();
        tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .expect("the flush ran")
            .expect("the spans were exported");
    }
}
