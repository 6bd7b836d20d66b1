//! Log output: readable lines by default, one JSON object per line with `--json`.
//!
//! Every job runs in a `job` span carrying `job`, `uuid`, `queue` and `attempt`; each job event
//! (RUNNING, DONE, RELEASED, FAILED) carries `status`, and `duration_ms` once it ended.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the worker's log output unless the application installed its own, and reports
/// panics as one log line in the panicking job's span instead of the default stderr dump. The
/// level comes from `RUST_LOG` (default `info`).
pub fn init(json: bool) {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(%location, "panicked: {message}");
    }));
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.compact().try_init()
    };
}
