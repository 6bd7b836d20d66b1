//! Where a resumable job's checkpoints go: [`RedisStore`], saving each in one script call with
//! the extension of the attempt's reservation (`checkpoint.lua`).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::CHECKPOINT_KEPT;
use crate::job::checkpoint::{CheckpointStore, Reservation};
use crate::queue::{scripts, seconds_arg, RedisQueue};

/// A resumable attempt's checkpoints in Redis.
#[derive(Debug)]
pub(super) struct RedisStore {
    pub(super) redis: RedisQueue,
    /// The checkpoint's key.
    pub(super) key: String,
    /// The reservation the attempt runs under.
    pub(super) reservation: Reservation,
    /// How long the reservation lasts from each save (the worker's retry_after).
    pub(super) lease: Duration,
}

impl CheckpointStore for RedisStore {
    fn save<'a>(
        &'a self,
        checkpoint: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async move {
            let mut call = scripts::CHECKPOINT.key(&self.reservation.queue.reserved);
            call.key(&self.key)
                .arg(&*self.reservation.reserved)
                .arg(seconds_arg(self.lease))
                .arg(checkpoint)
                .arg(CHECKPOINT_KEPT.as_secs());
            match self.redis.invoke::<u64>(&call).await {
                Ok(1) => Ok(()),
                Ok(_) => Err(
                    "its reservation is no longer held (it expired, and another \
                              worker may run the job now)"
                        .to_owned(),
                ),
                Err(err) => Err(err.to_string()),
            }
        })
    }
}
