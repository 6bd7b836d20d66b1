//! Log output: one readable line per event by default, one JSON object per line with `--json`.
//!
//! Every job runs in a `job` span carrying `job`, `uuid`, `queue` and `attempt`; each job event
//! carries `status` (RUNNING, DONE, RELEASED, FAILED), and `duration_ms` once the attempt ended.
//! A readable line looks like:
//!
//! ```text
//! 2026-11-21 22:42:21.278 FAILED   demo panic 7d1a6854-23e7-43ab-9daf-4fd33ce20242 #2 0.11 ms: panicked: boom
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io::IsTerminal;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Installs the worker's log output unless the application installed its own, and reports
/// panics as one log line in the panicking job's span instead of the default stderr dump. The
/// level comes from `RUST_LOG` (default `info`). With the feature `otel` and an OTLP endpoint
/// in the environment (`OTEL_EXPORTER_OTLP_ENDPOINT`), spans at level info and above are also
/// exported to that collector (`RUST_LOG` filters both: a level above info exports no job
/// spans).
pub fn init(json: bool) {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = redjob::middleware::panic_message(info.payload());
        tracing::error!(%location, "panicked: {message}");
    }));
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // An application's own subscriber stays, and exports (or not) as it was set up to.
    #[cfg(feature = "otel")]
    let export = (!tracing::dispatcher::has_been_set())
        .then(crate::otlp::layer)
        .flatten();
    #[cfg(not(feature = "otel"))]
    let export = None::<tracing_subscriber::layer::Identity>;
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let output = if json {
        output
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed()
    } else {
        output.event_format(Readable).boxed()
    };
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(JobFieldsLayer)
        .with(output)
        .with(export)
        .try_init();
}

/// Exports the spans not yet sent to the OTLP collector, if [`init`] set up an export
/// (feature `otel`, `docs/tracing.md`), and ends the export; does nothing otherwise.
/// [`Command::run`](crate::Command::run) calls it before it returns.
pub fn flush() {
    #[cfg(feature = "otel")]
    crate::otlp::flush();
}

/// Field names and values of a span or event, as text.
#[derive(Debug, Clone, Default)]
struct Fields(BTreeMap<&'static str, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

impl Fields {
    fn take(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    fn get(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or("?")
    }
}

/// Keeps the fields of each `job` span, for the readable format.
struct JobFieldsLayer;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for JobFieldsLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "job" {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }
}

/// The readable line format.
struct Readable;

impl<S, N> FormatEvent<S, N> for Readable
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let job = ctx.event_scope().and_then(|scope| {
            scope
                .from_root()
                .find_map(|span| span.extensions().get::<Fields>().cloned())
        });
        write!(w, "{} ", chrono::Utc::now().format("%Y-%m-%d %H:%M:%S%.3f"))?;
        let level = *event.metadata().level();
        match (&job, fields.take("status")) {
            (Some(job), Some(status)) => {
                write!(
                    w,
                    "{status:<8} {} {} {} #{}",
                    job.get("queue"),
                    job.get("job"),
                    job.get("uuid"),
                    job.get("attempt")
                )?;
                if let Some(ms) = fields.take("duration_ms") {
                    let ms: f64 = ms.parse().unwrap_or(0.0);
                    write!(w, " {ms:.2} ms")?;
                }
                if let Some(delay) = fields.take("retry_in_s") {
                    write!(w, ", again in {delay} s")?;
                }
                if let Some(reason) = fields.take("reason") {
                    write!(w, ": {reason}")?;
                }
            }
            _ => {
                if level != Level::INFO {
                    write!(w, "{level} ")?;
                }
                write!(w, "{}", fields.take("message").unwrap_or_default())?;
                for (name, value) in &fields.0 {
                    write!(w, " {name}={value}")?;
                }
                if let Some(job) = &job {
                    write!(
                        w,
                        " [{} {} #{}]",
                        job.get("job"),
                        job.get("uuid"),
                        job.get("attempt")
                    )?;
                }
            }
        }
        writeln!(w)
    }
}
