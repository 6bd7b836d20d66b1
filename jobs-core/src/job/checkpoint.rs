//! A job's checkpoints as its context holds them: the last one saved, or read back when the
//! attempt started, and where saving one goes. The capability that keeps them in Redis
//! ([`crate::checkpoint`]) installs a [`CheckpointStore`] in the attempts of job types that
//! keep them; without one (a fake, a synchronous run) a checkpoint stays in the context.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use crate::queue::keys::QueueKeys;

/// Where a context saves the checkpoints its job makes.
pub trait CheckpointStore: Send + Sync + Debug {
    /// Saves `checkpoint` (JSON) for the attempt it was installed in; `Err` says why it was
    /// not saved.
    fn save<'a>(
        &'a self,
        checkpoint: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;
}

/// The reservation an attempt runs under: a checkpoint is saved only while it is held.
#[derive(Debug, Clone)]
pub struct Reservation {
    /// The keys of the queue, or of the group, the job was reserved from.
    pub queue: Arc<QueueKeys>,
    /// The reserved copy, byte for byte as the pop returned it.
    pub reserved: Arc<str>,
}

/// What a context holds of its job's checkpoints.
#[derive(Debug, Default)]
pub(crate) struct Checkpoints {
    /// The last checkpoint, as JSON: saved by this attempt, or read back when it started.
    last: Mutex<Option<String>>,
    store: OnceLock<Arc<dyn CheckpointStore>>,
    reservation: OnceLock<Reservation>,
}

impl Checkpoints {
    pub(crate) fn last(&self) -> Option<String> {
        self.lock().clone()
    }

    pub(crate) fn has_last(&self) -> bool {
        self.lock().is_some()
    }

    pub(crate) fn set_last(&self, checkpoint: Option<String>) {
        *self.lock() = checkpoint;
    }

    pub(crate) fn store(&self) -> Option<&Arc<dyn CheckpointStore>> {
        self.store.get()
    }

    pub(crate) fn keep_in(&self, store: Arc<dyn CheckpointStore>) {
        let _ = self.store.set(store);
    }

    pub(crate) fn reservation(&self) -> Option<&Reservation> {
        self.reservation.get()
    }

    pub(crate) fn set_reservation(&self, reservation: Reservation) {
        let _ = self.reservation.set(reservation);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}
