//! Progress a running tracked job reports, written to its status record at most once per
//! [`EVERY`] (`progress.lua`), so a handler may report as often as it likes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::job::context::{JobContext, ProgressSink};
use crate::queue::keys::KeyLayout;
use crate::queue::scripts;
use crate::queue::RedisQueue;

/// The shortest time between two progress writes of one job.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// Writes one attempt's progress: the first report at once, then the latest one at most
/// every [`EVERY`], by a task that ends when nothing new was reported.
#[derive(Debug)]
pub(crate) struct ProgressWriter {
    queue: RedisQueue,
    record: String,
    stream: String,
    uuid: String,
    attempt: u32,
    job: String,
    /// The length of the queue's events stream, 0 when its events are off.
    events: u64,
    /// The latest report not yet written, and whether the writing task runs.
    pending: Mutex<(Option<String>, bool)>,
}

impl ProgressWriter {
    pub(crate) fn new(queue: RedisQueue, ctx: &JobContext, events: Option<u64>) -> ProgressWriter {
        let uuid = ctx.uuid().to_string();
        let record = queue.keys().status(&uuid);
        let (stream, events) = events_in_call(&queue, ctx.queue(), events, &record);
        ProgressWriter {
            record,
            stream,
            queue,
            uuid,
            attempt: ctx.attempt(),
            job: ctx.job_name().to_owned(),
            events,
            pending: Mutex::new((None, false)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<String>, bool)> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the latest report, then waits [`EVERY`] before the next, until none is left.
    async fn write_until_idle(self: Arc<Self>) {
        loop {
            let Some(progress) = ({
                let mut pending = self.lock();
                let next = pending.0.take();
                pending.1 = next.is_some();
                next
            }) else {
                return;
            };
            let mut call = scripts::PROGRESS.key(&self.record);
            call.key(&self.stream)
                .arg(&self.uuid)
                .arg(self.attempt)
                .arg(&progress)
                .arg(&self.job)
                .arg(self.events);
            if let Err(err) = self.queue.invoke::<u64>(&call).await {
                tracing::warn!(error = %err, "cannot record the job's progress");
            }
            tokio::time::sleep(EVERY).await;
        }
    }
}

/// The sink a context sends its progress to: the writer, shared with its task.
#[derive(Debug)]
pub(crate) struct Sink(pub(crate) Arc<ProgressWriter>);

impl ProgressSink for Sink {
    fn report(&self, _ctx: &JobContext, progress: &str) {
        let mut pending = self.0.lock();
        pending.0 = Some(progress.to_owned());
        if pending.1 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        pending.1 = true;
        drop(pending);
        runtime.spawn(self.0.clone().write_until_idle());
    }
}

/// The events stream `progress.lua` appends to, and its length ('0': none). On a cluster the
/// stream lives in the queue's slot, not the record's: the call then appends no event (the
/// record's key stands in for the stream's, unused), and a job's `progress` events are not
/// written there.
fn events_in_call(
    queue: &RedisQueue,
    name: &str,
    events: Option<u64>,
    record: &str,
) -> (String, u64) {
    match (queue.layout(), events) {
        (KeyLayout::Standalone, Some(maxlen)) => (queue.keys().events(name), maxlen),
        _ => (record.to_owned(), 0),
    }
}
