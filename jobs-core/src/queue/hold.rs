//! Holds: what a job keeps in Redis while it runs, freed in the step that settles it.
//!
//! A hold is a key and the owner token that holds it: an overlap lock or a funnel slot taken
//! by a middleware for one attempt (owner: the job's uuid and attempt), or the unique lock of
//! a dispatch (owner: the job's uuid, through every attempt). A running job's holds are
//! leases: the worker's heartbeat renews them with its reservation, so the holds of a job
//! whose worker died run out within one lease, and a long job never loses them. This is where
//! a hold is renewed and freed (`leases.lua`).

use redis::ScriptInvocation;
use std::sync::Mutex;
use std::time::Duration;

use crate::error::Result;
use crate::queue::keys::KeyLayout;
use crate::queue::protocol::WorkerQueue;
use crate::queue::scripts;

/// One key held by one owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The full key name, prefix included.
    pub key: String,
    /// The token the key holds while the hold lasts.
    pub owner: String,
}

/// How long a hold lasts once its job settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldUntil {
    /// Freed whenever the attempt settles, however it ended (overlap locks, funnel slots).
    Attempt,
    /// Freed when the job is done or has failed for good, kept through releases and retries
    /// (unique locks).
    Job,
}

/// The holds one attempt has taken, as its middleware adds them.
#[derive(Debug, Default)]
pub struct Holds {
    held: Mutex<Vec<(Hold, HoldUntil)>>,
}

impl Holds {
    /// Records a hold, once.
    pub fn add(&self, hold: Hold, until: HoldUntil) {
        let mut held = self.lock();
        if !held.iter().any(|(h, _)| *h == hold) {
            held.push((hold, until));
        }
    }

    /// Forgets a hold freed early (a unique lock freed when the job starts).
    pub fn remove(&self, key: &str) {
        self.lock().retain(|(hold, _)| hold.key != key);
    }

    /// Every hold, for the heartbeat to renew: only those of the attempt, since a unique lock
    /// has its own lifetime.
    pub fn leases(&self) -> Vec<Hold> {
        self.matching(|until| until == HoldUntil::Attempt)
    }

    /// The holds to free when the attempt settles: all of them when the job is finished
    /// (done or failed), those of the attempt when it comes back.
    pub fn to_free(&self, finished: bool) -> Vec<Hold> {
        self.matching(|until| finished || until == HoldUntil::Attempt)
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn matching(&self, wanted: impl Fn(HoldUntil) -> bool) -> Vec<Hold> {
        self.lock()
            .iter()
            .filter(|(_, until)| wanted(*until))
            .map(|(hold, _)| hold.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Hold, HoldUntil)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Which holds to renew: `holds`, for `lease` from now.
#[derive(Debug, Clone, Copy)]
pub struct RenewArgs<'a> {
    /// The holds of running jobs.
    pub holds: &'a [Hold],
    /// How long they hold from now (Redis's clock).
    pub lease: Duration,
}

impl WorkerQueue<'_> {
    /// Renews the holds of running jobs for `renew.lease` from now (Redis's clock); returns
    /// how many were still held.
    pub async fn renew_holds(&self, renew: RenewArgs<'_>) -> Result<u64> {
        let mut renewed = 0;
        for group in self.hold_groups(renew.holds) {
            let mut call = scripts::LEASES.prepare_invoke();
            call.arg("renew").arg(renew.lease.as_millis() as u64);
            add_holds(&mut call, group);
            renewed += self.handle.invoke::<u64>(&call).await?;
        }
        Ok(renewed)
    }

    /// Frees holds, each only if its owner still holds it.
    pub async fn free_holds(&self, holds: &[Hold]) -> Result<()> {
        if self.handle.free_offline(holds) {
            return Ok(());
        }
        for group in self.hold_groups(holds) {
            let mut call = scripts::LEASES.prepare_invoke();
            call.arg("free").arg(0);
            add_holds(&mut call, group);
            self.handle.invoke::<u64>(&call).await?;
        }
        Ok(())
    }

    /// Holds in calls that each touch one slot: all of them together on one server, one by
    /// one on a cluster.
    fn hold_groups<'h>(&self, holds: &'h [Hold]) -> Vec<&'h [Hold]> {
        match (holds.is_empty(), self.handle.layout()) {
            (true, _) => Vec::new(),
            (false, KeyLayout::Standalone) => vec![holds],
            (false, KeyLayout::Cluster) => holds.chunks(1).collect(),
        }
    }

    /// On a cluster, frees `holds` in calls of their own and returns none left for the settling
    /// script; on one server returns them all for it.
    pub(crate) async fn free_on_cluster<'h>(&self, holds: &'h [Hold]) -> Result<&'h [Hold]> {
        match self.handle.layout() {
            KeyLayout::Standalone => Ok(holds),
            KeyLayout::Cluster => {
                self.free_holds(holds).await?;
                Ok(&[])
            }
        }
    }
}

/// Adds holds to a script's call: their keys after its own, their owners after its own
/// arguments.
pub(crate) fn add_holds(call: &mut ScriptInvocation<'_>, holds: &[Hold]) {
    for hold in holds {
        call.key(&hold.key);
    }
    for hold in holds {
        call.arg(&hold.owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(key: &str) -> Hold {
        Hold {
            key: key.into(),
            owner: "o".into(),
        }
    }

    #[test]
    fn a_release_frees_the_attempts_holds_and_keeps_the_unique_lock() {
        let holds = Holds::default();
        holds.add(hold("overlap"), HoldUntil::Attempt);
        holds.add(hold("overlap"), HoldUntil::Attempt);
        holds.add(hold("unique"), HoldUntil::Job);
        assert_eq!(holds.leases(), [hold("overlap")]);
        assert_eq!(holds.to_free(false), [hold("overlap")]);
        assert_eq!(holds.to_free(true), [hold("overlap"), hold("unique")]);
        holds.remove("unique");
        assert_eq!(holds.to_free(true), [hold("overlap")]);
    }
}
