//! Wait thresholds, as Horizon's `waits`: per queue, how many seconds a job may wait for a
//! worker before the queue is flagged.
//!
//! They live in Redis (`jobs:waits`, a hash of queue name to seconds), so that every tool sees
//! the same ones: a worker started with `--wait emails=60` writes its thresholds there, and
//! `jobsctl waits set` and `jobsctl waits clear` change them. A queue's wait is measured, not
//! estimated: [`QueueStats::wait_secs`](super::QueueStats::wait_secs) is how long its oldest
//! waiting job has waited, by Redis's clock. `jobsctl monitor` exits 1 when a queue's wait is
//! over its threshold, the dashboard highlights it, and workers export it to Prometheus.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redjob::admin::AdminError> {
//! use redjob::admin::Admin;
//! let admin = Admin::open("redis://127.0.0.1:6379")?;
//! admin.set_wait("emails", 60).await?;
//! for stats in admin.watched_queues().await? {
//!     if stats.wait_exceeded {
//!         println!("{} has waited {:?} s", stats.name, stats.wait_secs);
//!     }
//! }
//! # Ok(()) }
//! ```

use redis::AsyncCommands;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::admin::error::{AdminError, InvalidWait};
use crate::admin::Admin;
use crate::queue::keys::check_queue_name;

/// A queue's wait threshold: the seconds its jobs may wait before the queue is flagged.
/// Written `QUEUE=SECONDS` on the command line (`emails=60`).
///
/// ```
/// use redjob::admin::WaitThreshold;
/// let threshold: WaitThreshold = "emails=60".parse().unwrap();
/// assert_eq!((threshold.queue(), threshold.secs()), ("emails", 60));
/// assert_eq!(threshold.to_string(), "emails=60");
/// assert!("emails=0".parse::<WaitThreshold>().is_err());
/// assert!("emails".parse::<WaitThreshold>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct WaitThreshold {
    queue: String,
    secs: u64,
}

impl WaitThreshold {
    /// The threshold of `secs` seconds for the queue `queue`. The queue name must be one a
    /// worker could serve ([`check_queue_name`]), and `secs` at least 1.
    pub fn new(queue: impl Into<String>, secs: u64) -> Result<Self, InvalidWait> {
        let queue = queue.into();
        check_queue_name(&queue)?;
        if secs == 0 {
            return Err(InvalidWait::Seconds {
                queue,
                value: secs.to_string(),
            });
        }
        Ok(WaitThreshold { queue, secs })
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The seconds its jobs may wait.
    pub fn secs(&self) -> u64 {
        self.secs
    }
}

impl fmt::Display for WaitThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.queue, self.secs)
    }
}

impl FromStr for WaitThreshold {
    type Err = InvalidWait;

    /// Parses `QUEUE=SECONDS`. The queue name is what precedes the last `=`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (queue, secs) = s
            .rsplit_once('=')
            .ok_or_else(|| InvalidWait::Format(s.to_owned()))?;
        let value = secs.trim();
        let secs = value.parse().map_err(|_| InvalidWait::Seconds {
            queue: queue.to_owned(),
            value: value.to_owned(),
        })?;
        WaitThreshold::new(queue, secs)
    }
}

/// A threshold as read from Redis.
pub(super) fn stored_threshold(queue: &str, value: String) -> Result<u64, AdminError> {
    value.trim().parse().map_err(|_| {
        AdminError::InvalidWait(InvalidWait::Stored {
            queue: queue.to_owned(),
            value,
        })
    })
}

/// Whether a queue that has waited `wait_secs` is over `threshold_secs`: only a wait longer
/// than the threshold is, as in Horizon.
pub(super) fn exceeds(wait_secs: Option<u64>, threshold_secs: Option<u64>) -> bool {
    matches!((wait_secs, threshold_secs), (Some(wait), Some(threshold)) if wait > threshold)
}

impl Admin {
    /// Every wait threshold, by queue name.
    pub async fn waits(&self) -> Result<BTreeMap<String, u64>, AdminError> {
        let mut conn = self.queue.connection();
        let stored: Vec<(String, String)> = self
            .queue
            .timed(conn.hgetall(self.queue.keys().waits()))
            .await?;
        stored
            .into_iter()
            .map(|(queue, value)| {
                let secs = stored_threshold(&queue, value)?;
                Ok((queue, secs))
            })
            .collect()
    }

    /// Sets the wait threshold of `queue` to `secs` seconds (at least 1); returns the one it
    /// replaced.
    pub async fn set_wait(&self, queue: &str, secs: u64) -> Result<Option<u64>, AdminError> {
        let threshold = WaitThreshold::new(queue, secs)?;
        let key = self.queue.keys().waits();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hget(&key, threshold.queue())
            .hset(&key, threshold.queue(), threshold.secs())
            .ignore();
        let mut conn = self.queue.connection();
        let (previous,): (Option<String>,) = self.queue.timed(pipe.query_async(&mut conn)).await?;
        Ok(previous.and_then(|value| value.trim().parse().ok()))
    }

    /// Removes the wait threshold of `queue`; `false` when it had none.
    pub async fn clear_wait(&self, queue: &str) -> Result<bool, AdminError> {
        check_queue_name(queue)?;
        let mut conn = self.queue.connection();
        let removed: u64 = self
            .queue
            .timed(conn.hdel(self.queue.keys().waits(), queue))
            .await?;
        Ok(removed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_from_queue_equals_seconds() {
        let parsed: WaitThreshold = "mail=eu=300".parse().unwrap();
        assert_eq!((parsed.queue(), parsed.secs()), ("mail=eu", 300));
        assert_eq!(
            " 5 ".parse::<WaitThreshold>(),
            Err(InvalidWait::Format(" 5 ".into()))
        );
        assert_eq!(
            "emails=1.5".parse::<WaitThreshold>(),
            Err(InvalidWait::Seconds {
                queue: "emails".into(),
                value: "1.5".into()
            })
        );
        assert!(matches!(
            "=60".parse::<WaitThreshold>(),
            Err(InvalidWait::Queue(_))
        ));
        assert_eq!(
            "emails=0".parse::<WaitThreshold>().unwrap_err().to_string(),
            "invalid wait threshold for queue emails: \"0\" is not a whole number of seconds of at least 1"
        );
    }

    #[test]
    fn only_a_wait_longer_than_the_threshold_exceeds_it() {
        assert!(exceeds(Some(61), Some(60)));
        assert!(!exceeds(Some(60), Some(60)));
        assert!(!exceeds(None, Some(60)));
        assert!(!exceeds(Some(3600), None));
    }

    #[test]
    fn a_stored_threshold_must_be_a_number() {
        assert_eq!(stored_threshold("q", "60".into()).unwrap(), 60);
        let err = stored_threshold("q", "soon".into()).unwrap_err();
        assert!(err.to_string().contains("queue q is \"soon\""), "{err}");
    }
}
