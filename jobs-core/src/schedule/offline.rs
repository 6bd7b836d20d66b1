//! The schedules' offline extension point: on a handle that talks to no Redis, a fired tick
//! goes to an [`OfflineSchedule`] its extensions hold (the fake queue of [`crate::testing`]
//! records it).

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

use crate::queue::{Envelope, RedisQueue};
use crate::schedule::fire::Fired;

/// Where an offline handle's schedule ticks go.
pub(crate) trait OfflineSchedule: Send + Sync + 'static {
    /// Fires the tick `tick` of the schedule `name`, pushing `envelope` unless a tick as late
    /// was fired, or, with `overlap_lock` (its key and how long it lasts), while the job of an
    /// earlier tick holds it.
    fn fire<'a>(
        &'a self,
        queue: &'a RedisQueue,
        name: &'a str,
        tick: DateTime<Utc>,
        envelope: &'a Envelope,
        overlap_lock: Option<(String, Duration)>,
    ) -> BoxFuture<'a, Fired>;
}

/// The [`OfflineSchedule`] of an offline handle, as its extensions hold it.
pub(crate) struct OfflineSchedules(pub(crate) Arc<dyn OfflineSchedule>);

impl RedisQueue {
    /// Where this handle's schedule ticks go when it talks to no Redis.
    pub(crate) fn offline_schedules(&self) -> Option<Arc<OfflineSchedules>> {
        match self.is_offline() {
            true => self.extensions().get::<OfflineSchedules>(),
            false => None,
        }
    }
}
