//! Traces across the queue, exported over OTLP/HTTP to a receiver each test starts: a job
//! dispatched inside a span is worked in another process, whose attempts continue that trace
//! (children of the dispatch's `send` span, a failed attempt's error recorded), or start a
//! trace of their own linked to it; a chain's links and a batch's callback are children of the
//! span the workflow was dispatched in, and a batch's jobs are linked to it; and a dispatch with
//! no OpenTelemetry layer writes no trace keys.

use examples::{Flaky, Noop};
use redis::AsyncCommands;
use redjob::{Batch, Chain, RedisQueue};
use std::time::Duration;
use tests::otlp::{Exporting, OtlpReceiver, ReceivedSpan};
use tests::{SentVia, TestRedis};
use tracing::Instrument;

const LONG: Duration = Duration::from_secs(30);

/// OTLP's span kinds.
const PRODUCER: i32 = 4;
const CONSUMER: i32 = 5;
/// OTLP's error status code.
const ERROR: i32 = 2;

/// A receiver, a server and its handle, and this test's spans exported to the receiver as the
/// service `dispatcher`. Bound in this order, the export ends (and flushes) before the
/// receiver stops.
fn traced() -> (OtlpReceiver, TestRedis, RedisQueue, Exporting) {
    let receiver = OtlpReceiver::start();
    let redis = TestRedis::start();
    let queue = redis.queue();
    let exporting = Exporting::to(&receiver, "dispatcher");
    (receiver, redis, queue, exporting)
}

/// Drains `queue` with a worker that exports its spans to `receiver`, started with `args`:
/// returns once it stopped, the queue empty, with status 0.
async fn drain_exporting(redis: &TestRedis, receiver: &OtlpReceiver, queue: &str, args: &[&str]) {
    let mut all = vec!["--queue", queue, "--stop-when-empty"];
    all.extend_from_slice(args);
    let mut worker = receiver.exporting_worker(env!("CARGO_BIN_EXE_test_worker"), redis, &all);
    assert!(worker.wait_exit(LONG).await.success());
}

/// The one span named `name` among `spans`.
fn only<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let named: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(named.len(), 1, "spans named {name:?}: {spans:#?}");
    named[0]
}

#[tokio::test]
async fn a_job_dispatched_in_a_span_continues_its_trace_in_the_worker_with_each_attempt() {
    let (receiver, redis, queue, exporting) = traced();
    let uuid = Flaky { fail_times: 1 }
        .dispatch()
        .on_queue("traced")
        .sent_via(&queue)
        .instrument(tracing::info_span!("checkout"))
        .await;
    exporting.flush().await;

    drain_exporting(&redis, &receiver, "traced", &["--tries", "2"]).await;
    let attempts = receiver.wait_for_named("process queues:traced", 2).await;
    let spans = receiver.spans();
    let checkout = only(&spans, "checkout");
    let send = only(&spans, "send queues:traced");
    assert_eq!(send.service, "dispatcher");
    assert_eq!(send.kind, PRODUCER);
    assert_eq!(send.parent_span_id, checkout.span_id);
    assert_eq!(send.attribute("messaging.system").as_deref(), Some("redis"));
    assert_eq!(
        send.attribute("messaging.operation.type").as_deref(),
        Some("send")
    );

    let mut attempts = attempts;
    attempts.sort_by_key(|span| span.attribute("messaging.message.attempts"));
    for (number, attempt) in attempts.iter().enumerate() {
        assert_eq!(attempt.service, "redjob-worker");
        assert_eq!(attempt.kind, CONSUMER);
        assert_eq!(
            attempt.trace_id, checkout.trace_id,
            "one trace: {attempt:#?}"
        );
        assert_eq!(
            attempt.parent_span_id, send.span_id,
            "a child of the send span"
        );
        let expected = [
            ("messaging.system", "redis".to_owned()),
            ("messaging.destination.name", "queues:traced".to_owned()),
            ("messaging.operation.type", "process".to_owned()),
            ("messaging.message.id", uuid.to_string()),
            ("messaging.message.job_name", "flaky".to_owned()),
            ("messaging.message.attempts", (number + 1).to_string()),
        ];
        for (key, value) in expected {
            assert_eq!(attempt.attribute(key), Some(value), "{key} of {attempt:#?}");
        }
    }
    let (failed, succeeded) = (&attempts[0], &attempts[1]);
    assert_eq!(failed.status_code, ERROR, "{failed:#?}");
    assert_eq!(failed.attribute("error.type").as_deref(), Some("error"));
    let exception = failed
        .events
        .iter()
        .find(|(name, _)| name == "exception")
        .unwrap_or_else(|| panic!("an exception event: {failed:#?}"));
    let message = exception.1["exception.message"].as_str().unwrap();
    assert!(message.contains("failing on purpose"), "{message}");
    assert_ne!(succeeded.status_code, ERROR, "{succeeded:#?}");
    assert!(succeeded.attribute("error.type").is_none());
}

#[tokio::test]
async fn with_trace_link_each_attempt_starts_a_trace_of_its_own_linked_to_its_dispatch() {
    let (receiver, redis, queue, exporting) = traced();
    Noop {}
        .dispatch()
        .on_queue("fanout")
        .sent_via(&queue)
        .instrument(tracing::info_span!("import"))
        .await;
    exporting.flush().await;

    drain_exporting(&redis, &receiver, "fanout", &["--trace", "link"]).await;
    let attempt = receiver.wait_for_named("process queues:fanout", 1).await[0].clone();
    let send = only(&receiver.spans(), "send queues:fanout").clone();
    assert_ne!(attempt.trace_id, send.trace_id, "a trace of its own");
    assert_eq!(attempt.parent_span_id, "", "a root");
    assert_eq!(attempt.links, [(send.trace_id, send.span_id)]);
    assert_eq!(
        attempt.attribute("redjob.trace.mode").as_deref(),
        Some("link")
    );
}

#[tokio::test]
async fn chain_links_and_batch_callbacks_are_children_of_the_dispatching_span_and_batch_jobs_links()
{
    let (receiver, redis, queue, exporting) = traced();
    async {
        Chain::new(Noop {}.dispatch())
            .then(Noop {}.dispatch())
            .on_queue("workflows")
            .via(&queue)
            .dispatch()
            .await
            .unwrap();
        Batch::new()
            .jobs([Noop {}.dispatch(), Noop {}.dispatch()])
            .then(Noop {}.dispatch())
            .on_queue("workflows")
            .via(&queue)
            .dispatch()
            .await
            .unwrap();
    }
    .instrument(tracing::info_span!("import"))
    .await;
    exporting.flush().await;
    let import = receiver.wait_for_named("import", 1).await.remove(0);

    drain_exporting(&redis, &receiver, "workflows", &[]).await;
    let attempts = receiver.wait_for_named("process queues:workflows", 5).await;
    let mode = |span: &ReceivedSpan| span.attribute("redjob.trace.mode");
    let (linked, children): (Vec<_>, Vec<_>) = attempts
        .iter()
        .partition(|span| mode(span).as_deref() == Some("link"));
    assert_eq!(linked.len(), 2, "the batch's two jobs: {attempts:#?}");
    for job in linked {
        assert_eq!(job.parent_span_id, "");
        assert_eq!(
            job.links,
            [(import.trace_id.clone(), import.span_id.clone())]
        );
    }
    assert_eq!(
        children.len(),
        3,
        "two links and the callback: {attempts:#?}"
    );
    for job in children {
        assert_eq!(mode(job).as_deref(), Some("child"));
        assert_eq!(job.trace_id, import.trace_id);
        assert_eq!(job.parent_span_id, import.span_id);
    }
}

#[tokio::test]
async fn a_job_failed_before_it_runs_has_its_failure_recorded_once() {
    let (receiver, redis, queue, exporting) = traced();
    Noop {}
        .dispatch()
        .on_queue("spent")
        .tries(1)
        .sent_via(&queue)
        .instrument(tracing::info_span!("request"))
        .await;
    exporting.flush().await;
    // As a job whose one attempt was used by a worker that died: the next is one too many.
    let mut conn = redis.conn().await;
    let pushed: String = conn.lpop("queues:spent", None).await.unwrap();
    let spent = redjob::payload::with_attempts(&pushed, 1).unwrap();
    let _: () = conn.rpush("queues:spent", spent).await.unwrap();

    drain_exporting(&redis, &receiver, "spent", &[]).await;
    let attempt = receiver
        .wait_for_named("process queues:spent", 1)
        .await
        .remove(0);
    assert_eq!(attempt.status_code, ERROR, "{attempt:#?}");
    assert_eq!(attempt.attribute("error.type").as_deref(), Some("failed"));
    let exceptions = attempt
        .events
        .iter()
        .filter(|(name, _)| name == "exception");
    assert_eq!(exceptions.count(), 1, "{attempt:#?}");
}

#[tokio::test]
async fn without_an_opentelemetry_layer_a_dispatch_writes_no_trace_keys() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    // A subscriber records the spans, as a service's log output does, but no OpenTelemetry.
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry());
    Noop {}
        .dispatch()
        .on_queue("plain")
        .sent_via(&queue)
        .instrument(tracing::info_span!("request"))
        .await;
    let mut conn = redis.conn().await;
    let payloads: Vec<String> = conn.lrange("queues:plain", 0, -1).await.unwrap();
    assert_eq!(payloads.len(), 1);
    assert!(!payloads[0].contains("traceparent"), "{}", payloads[0]);
    assert!(!payloads[0].contains("tracestate"), "{}", payloads[0]);
}
