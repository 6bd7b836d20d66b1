//! A batch's record as the workflow reads it: its keys, how long it is kept once finished, and
//! its callback links, read once per batch and kept on the handle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::keys::KeyLayout;
use crate::queue::RedisQueue;
use crate::workflow::link::Link;

/// Which callback: the index into a batch's callbacks and the field of the callbacks hash.
const CALLBACKS: [&str; 3] = ["then", "catch", "finally"];

/// A batch's callback links (`then`, `catch`, `finally`), from which a script call that may
/// finish the batch takes the keys and due times of the queues they go to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Callbacks {
    pub(crate) links: [Option<Link>; 3],
}

impl Callbacks {
    /// For each callback, the key it is pushed to and its queue's notify (for a missing one,
    /// `placeholder` twice), then the due times. On a cluster the batch's calls only count
    /// (its callbacks' queues are in other slots, and pushed after): every key is
    /// `placeholder`, every due time empty.
    pub(crate) fn routes(
        &self,
        queue: &RedisQueue,
        placeholder: &str,
    ) -> (Vec<String>, Vec<String>) {
        if queue.layout() == KeyLayout::Cluster {
            return (vec![placeholder.to_owned(); 6], vec![String::new(); 3]);
        }
        let mut keys = Vec::with_capacity(6);
        let mut dues = Vec::with_capacity(3);
        for link in &self.links {
            match link {
                Some(link) => {
                    let queue_keys = queue.queue_keys(&link.queue);
                    keys.push(link.destination(&queue_keys));
                    keys.push(queue_keys.notify);
                    dues.push(link.due.clone());
                }
                None => {
                    keys.extend([placeholder.to_owned(), placeholder.to_owned()]);
                    dues.push(String::new());
                }
            }
        }
        (keys, dues)
    }
}

/// The keys of one batch.
#[derive(Debug, Clone)]
pub(crate) struct BatchKeys {
    pub(crate) record: String,
    pub(crate) pending: String,
    pub(crate) failed: String,
    pub(crate) callbacks: String,
}

impl BatchKeys {
    /// The keys in the order `batch.lua` and `lib/batch.lua` read them.
    pub(crate) fn all(&self) -> [&str; 4] {
        [&self.record, &self.pending, &self.failed, &self.callbacks]
    }
}

/// What a handle keeps per batch, made once per batch: a batch's callbacks never change, nor
/// what follows from them.
#[derive(Debug)]
pub(crate) struct PerBatch<T>(Mutex<HashMap<Uuid, Arc<T>>>);

impl<T> Default for PerBatch<T> {
    fn default() -> Self {
        PerBatch(Mutex::default())
    }
}

impl<T> PerBatch<T> {
    /// What is kept for the batch `id`, if anything.
    pub(crate) fn get(&self, id: Uuid) -> Option<Arc<T>> {
        self.lock().get(&id).cloned()
    }

    /// Keeps `value` for the batch `id`, and returns it.
    pub(crate) fn keep(&self, id: Uuid, value: T) -> Arc<T> {
        let value = Arc::new(value);
        let mut known = self.lock();
        if known.len() >= CACHED_BATCHES {
            known.clear();
        }
        known.insert(id, value.clone());
        value
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<T>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Batches a handle keeps anything for at most; past it, it forgets them all.
const CACHED_BATCHES: usize = 1024;

impl RedisQueue {
    /// The keys of the batch `id`.
    pub(crate) fn batch_keys(&self, id: Uuid) -> BatchKeys {
        let id = id.to_string();
        BatchKeys {
            record: self.keys().batch(&id),
            pending: self.keys().batch_pending(&id),
            failed: self.keys().batch_failed(&id),
            callbacks: self.keys().batch_callbacks(&id),
        }
    }

    /// The callback links of the batch `id`, read once and kept.
    pub(crate) async fn batch_callbacks(&self, id: Uuid) -> Result<Arc<Callbacks>> {
        let cache = self
            .extensions()
            .get_or_insert_with(PerBatch::<Callbacks>::default);
        if let Some(known) = cache.get(id) {
            return Ok(known);
        }
        let key = self.batch_keys(id).callbacks;
        let stored: HashMap<String, String> = self.query(redis::cmd("HGETALL").arg(key)).await?;
        let mut callbacks = Callbacks::default();
        for (slot, name) in callbacks.links.iter_mut().zip(CALLBACKS) {
            *slot = stored.get(name).and_then(|link| Link::decode(link));
        }
        Ok(cache.keep(id, callbacks))
    }

    /// How long a finished batch's record is kept.
    pub(crate) fn batch_retention(&self) -> Duration {
        self.config().batch_retention
    }
}
