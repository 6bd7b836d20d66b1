//! Holds: what a job keeps in Redis while it runs, freed in the step that settles it.
//!
//! A hold is a key and the owner token that holds it: an overlap lock or a funnel slot taken
//! by a middleware for one attempt (owner: the job's uuid and attempt), or the unique lock of
//! a dispatch (owner: the job's uuid, through every attempt). A running job's holds are
//! leases: the worker's heartbeat renews them with its reservation, so the holds of a job
//! whose worker died run out within one lease, and a long job never loses them.

use std::sync::Mutex;

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
