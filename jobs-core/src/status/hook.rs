//! The status capability's part in every attempt ([`AttemptHook`]): a tracked job's start is
//! recorded before its handler runs, its progress sent to its record while it runs, and its
//! outcome written by the call that settles it ([`StatusStep`]), with the events of a job
//! whose queue has them on. A cancelled job, tracked or not, has its cancel request removed
//! in that call.

use std::sync::Arc;
use std::time::Duration;

use crate::job::attempt::{AttemptHook, AttemptHookRegistration, StartedFuture};
use crate::job::context::JobContext;
use crate::payload::Payload;
use crate::queue::scripts;
use crate::queue::settle::SettleStep;
use crate::queue::{RedisQueue, OPEN_STATUS_TTL};
use crate::status::progress::{ProgressWriter, Sink};
use crate::status::record::JobState;
use crate::status::step::StatusStep;
use crate::status::MAX_RESULT_BYTES;

/// What an attempt records: its status, when the job is tracked (kept that long once it
/// settles), and events, when its queue's are on (the stream's length).
#[derive(Debug)]
struct Watched {
    keep: Option<Duration>,
    events: Option<u64>,
    /// The batch the job belongs to.
    batch: Option<uuid::Uuid>,
}

struct StatusHook;

inventory::submit!(AttemptHookRegistration(&StatusHook));

impl AttemptHook for StatusHook {
    fn start(&self, payload: &Payload, ctx: &JobContext) {
        let redis = ctx.redis().filter(|redis| !redis.is_offline());
        let events = redis.and_then(|redis| redis.events_maxlen(ctx.queue()));
        let keep = payload.track.map(Duration::from_secs);
        if keep.is_none() && events.is_none() {
            return;
        }
        ctx.extensions().insert(Watched {
            keep,
            events,
            batch: payload.batch,
        });
        if let (Some(redis), Some(_)) = (redis, keep) {
            let writer = ProgressWriter::new(redis.clone(), ctx, events);
            ctx.send_progress_to(Arc::new(Sink(Arc::new(writer))));
        }
    }

    fn started(
        &self,
        ctx: &Arc<JobContext>,
        queue: &RedisQueue,
        worker: &str,
    ) -> Option<StartedFuture> {
        let watched = ctx.extension::<Watched>()?;
        if queue.is_offline() || watched.keep.is_none() {
            return None;
        }
        let mut call = scripts::RUNNING.key(queue.keys().status(&ctx.uuid().to_string()));
        call.arg(ctx.attempt())
            .arg(worker)
            .arg(ctx.queue())
            .arg(ctx.job_name())
            .arg(OPEN_STATUS_TTL.as_millis() as u64);
        let queue = queue.clone();
        Some(Box::pin(async move {
            if let Err(err) = queue.invoke::<u64>(&call).await {
                tracing::warn!(error = %err, "cannot record that the job runs");
            }
        }))
    }

    fn done(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
    ) -> Result<Option<Box<dyn SettleStep>>, String> {
        let Some(watched) = ctx.extension::<Watched>() else {
            return Ok(None);
        };
        let outcome = match ctx.output() {
            None => None,
            Some(Ok(result)) if result.len() <= MAX_RESULT_BYTES => {
                Some(("result", result.clone()))
            }
            Some(Ok(result)) => Some((
                "error",
                format!(
                    "its result ({} bytes) is larger than {MAX_RESULT_BYTES} bytes and was not kept",
                    result.len()
                ),
            )),
            Some(Err(err)) => Some(("error", format!("its result does not serialize: {err}"))),
        };
        Ok(Some(step(ctx, JobState::Done, outcome, &watched)))
    }

    fn failed(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
        reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        let watched = ctx.extension::<Watched>();
        let unwatched = Watched {
            keep: None,
            events: None,
            batch: None,
        };
        let watched = watched.as_deref().unwrap_or(&unwatched);
        let state = match ctx.is_cancelled() {
            true => JobState::Cancelled,
            false if watched.keep.is_some() || watched.events.is_some() => JobState::Failed,
            false => return None,
        };
        Some(step(
            ctx,
            state,
            Some(("error", reason.to_owned())),
            watched,
        ))
    }

    fn released(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
        reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        put_back(ctx, reason, false)
    }

    fn interrupted(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
        reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        put_back(ctx, reason, true)
    }
}

/// The step of a job going back to its queue for `reason`, its worker stopping or not: its
/// record stays open, and its event says why it went back.
fn put_back(ctx: &JobContext, reason: &str, interrupted: bool) -> Option<Box<dyn SettleStep>> {
    let watched = ctx.extension::<Watched>()?;
    let outcome = Some(("error", reason.to_owned()));
    let open = Watched {
        keep: watched.keep.map(|_| OPEN_STATUS_TTL),
        events: watched.events,
        batch: None,
    };
    let mut step = step(ctx, JobState::Released, outcome, &open);
    step.interrupted = interrupted;
    Some(step)
}

fn step(
    ctx: &JobContext,
    state: JobState,
    outcome: Option<(&'static str, String)>,
    watched: &Watched,
) -> Box<StatusStep> {
    Box::new(StatusStep {
        uuid: ctx.uuid().to_string(),
        state,
        interrupted: false,
        attempt: ctx.attempt(),
        queue: ctx.queue().to_owned(),
        job: ctx.job_name().to_owned(),
        progress: ctx.last_progress(),
        outcome,
        keep: watched.keep,
        events: watched.events,
        batch: watched.batch.map(|batch| batch.to_string()),
    })
}
