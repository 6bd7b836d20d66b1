//! The checkpoint capability's part in every attempt ([`AttemptHook`]): a resumable job's
//! attempt saves its checkpoints to Redis, reads back the last one before its handler runs,
//! and deletes it in the step that settles the job done or failed ([`ForgetCheckpoint`]).

use async_trait::async_trait;
use std::sync::Arc;

use super::store::RedisStore;
use crate::error::Result;
use crate::job::attempt::{AttemptHook, AttemptHookRegistration, StartedFuture};
use crate::job::context::JobContext;
use crate::payload::Payload;
use crate::queue::effects::Effects;
use crate::queue::settle::{Ending, SettleStep};
use crate::queue::RedisQueue;

/// What a resumable attempt keeps: its checkpoint's key.
#[derive(Debug)]
struct Resumable {
    key: String,
}

struct CheckpointHook;

inventory::submit!(AttemptHookRegistration(&CheckpointHook));

impl AttemptHook for CheckpointHook {
    /// The worker gives the reservation of resumable jobs only: the others keep none.
    fn start(&self, payload: &Payload, ctx: &JobContext) {
        let Some(redis) = ctx.redis().filter(|redis| !redis.is_offline()) else {
            return;
        };
        let Some(reservation) = ctx.reservation() else {
            return;
        };
        let key = redis
            .keys()
            .checkpoint(&reservation.queue.name, &payload.uuid.to_string());
        ctx.keep_checkpoints_in(Arc::new(RedisStore {
            redis: redis.clone(),
            key: key.clone(),
            reservation: reservation.clone(),
            lease: ctx.lease(),
        }));
        ctx.extensions().insert(Resumable { key });
    }

    fn started(
        &self,
        ctx: &Arc<JobContext>,
        queue: &RedisQueue,
        _worker: &str,
    ) -> Option<StartedFuture> {
        let key = ctx.extension::<Resumable>()?.key.clone();
        let (ctx, queue) = (ctx.clone(), queue.clone());
        Some(Box::pin(async move {
            match queue
                .query::<Option<String>>(redis::cmd("GET").arg(&key))
                .await
            {
                Ok(checkpoint) => ctx.resume_from(checkpoint),
                Err(err) => tracing::warn!(
                    error = %err,
                    "cannot read the job's last checkpoint; it starts from the beginning"
                ),
            }
        }))
    }

    fn done(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
    ) -> std::result::Result<Option<Box<dyn SettleStep>>, String> {
        Ok(forget(ctx))
    }

    fn failed(
        &self,
        ctx: &JobContext,
        _queue: &RedisQueue,
        _reason: &str,
    ) -> Option<Box<dyn SettleStep>> {
        forget(ctx)
    }
}

/// The step that deletes a resumable attempt's checkpoint, when it is one.
fn forget(ctx: &JobContext) -> Option<Box<dyn SettleStep>> {
    let resumable = ctx.extension::<Resumable>()?;
    Some(Box::new(ForgetCheckpoint {
        key: resumable.key.clone(),
    }))
}

/// Deletes a job's checkpoint as it settles done or failed.
#[derive(Debug)]
struct ForgetCheckpoint {
    key: String,
}

#[async_trait]
impl SettleStep for ForgetCheckpoint {
    async fn effects(
        &self,
        _queue: &RedisQueue,
        _ending: Ending,
        into: &mut Effects,
    ) -> Result<()> {
        into.add("checkpoint", [self.key.clone()], []);
        Ok(())
    }

    /// In the queue's slot too, but deleted before the reservation: a crash in between runs
    /// the job again from the beginning, which a job must bear anyway.
    async fn on_cluster(&self, queue: &RedisQueue, _ending: Ending) -> Result<()> {
        queue.query::<()>(redis::cmd("DEL").arg(&self.key)).await
    }
}
