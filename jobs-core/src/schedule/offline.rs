//! The schedules' offline extension point: on a handle that talks to no Redis, a fired tick
//! goes to an [`OfflineSchedule`] its extensions hold (the fake queue of [`crate::testing`]
//! records it).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;

use crate::queue::{Envelope, RedisQueue};
use crate::schedule::fire::Fired;

/// Where an offline handle's schedule ticks go.
#[async_trait]
pub(crate) trait OfflineSchedule: Send + Sync + 'static {
    /// Fires the tick `tick` of the schedule `name`, pushing `envelope` unless a tick as late
    /// was fired, or, with `overlap_lock` (its key and how long it lasts), while the job of an
    /// earlier tick holds it.
    async fn fire(
        &self,
        queue: &RedisQueue,
        name: &str,
        tick: DateTime<Utc>,
        envelope: &Envelope,
        overlap_lock: Option<(String, Duration)>,
    ) -> Fired;
}

/// The [`OfflineSchedule`] of an offline handle, as its extensions hold it.
pub(crate) struct OfflineSchedules(pub(crate) Arc<dyn OfflineSchedule>);

impl RedisQueue {
    /// Hands the tick `tick` of the schedule `name` to this handle's [`OfflineSchedule`], when
    /// it talks to no Redis and has one; `None` otherwise, for the caller to fire it.
    pub(crate) async fn fire_offline(
        &self,
        name: &str,
        tick: DateTime<Utc>,
        envelope: &Envelope,
        overlap_lock: Option<(String, Duration)>,
    ) -> Option<Fired> {
        let schedules = self.offline_part::<OfflineSchedules>()?;
        Some(
            schedules
                .0
                .fire(self, name, tick, envelope, overlap_lock)
                .await,
        )
    }
}
