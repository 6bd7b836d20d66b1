//! Whether a job's batch was cancelled: one read serves every job of the batch that starts
//! within [`FRESH`] of it being sent, so a batch of many jobs running at once costs one read
//! per batch every few tens of milliseconds, not one per job. A job of a batch cancelled more
//! than that before it starts is skipped, on every worker; after a job of the batch failed in
//! this worker (which may have cancelled it), the next job reads again.

use redjob::__worker::WorkerQueue;
use redjob::RedisQueue;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use uuid::Uuid;

/// How old an answer a starting job takes: read at most this long before the job started.
pub(crate) const FRESH: Duration = Duration::from_millis(50);

/// Batches a worker keeps answers for at most; past it, it forgets those not being read.
const KNOWN_BATCHES: usize = 1024;

/// The worker's latest answers, per batch.
#[derive(Default)]
pub(crate) struct CancelledBatches {
    batches: Mutex<HashMap<Uuid, Answers, BuildHasherDefault<BatchIdHasher>>>,
}

/// Hashes a batch's id by folding its bytes: they are random (v4), and every job of a batch
/// looks its batch up, where SipHash cost a few hundred instructions each time.
#[derive(Default)]
struct BatchIdHasher(u64);

impl Hasher for BatchIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }
}

/// What a job asking about its batch does next.
enum Next {
    Answer(bool),
    Read,
    Wait(tokio::sync::futures::OwnedNotified),
}

#[derive(Default)]
struct Answers {
    /// The latest answer, with when its read was sent.
    latest: Option<(Instant, bool)>,
    /// A read is under way.
    reading: bool,
    /// Told when a read ends.
    read: Arc<Notify>,
}

impl CancelledBatches {
    /// Whether the batch `batch` was cancelled, by a read sent at most [`FRESH`] before
    /// `since` (a batch once cancelled stays so, and needs no new read).
    pub(crate) async fn cancelled(
        &self,
        queue: &RedisQueue,
        batch: Uuid,
        since: Instant,
    ) -> redjob::Result<bool> {
        loop {
            let read_ended = match self.answer_or_wait(batch, since) {
                Next::Answer(cancelled) => return Ok(cancelled),
                Next::Read => return self.read(queue, batch).await,
                Next::Wait(read_ended) => read_ended,
            };
            read_ended.await;
        }
    }

    /// The answer a read sent at most [`FRESH`] before `since` gave, when there is one: most
    /// jobs of a batch find it, and need no future to wait in.
    pub(crate) fn known(&self, batch: Uuid, since: Instant) -> Option<bool> {
        let batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        fresh(batches.get(&batch)?.latest, since)
    }

    /// The answer if one read late enough is known; else a read to make, or to wait for.
    fn answer_or_wait(&self, batch: Uuid, since: Instant) -> Next {
        let mut batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        if batches.len() > KNOWN_BATCHES {
            batches.retain(|_, answers| answers.reading);
        }
        let answers = batches.entry(batch).or_default();
        if let Some(cancelled) = fresh(answers.latest, since) {
            return Next::Answer(cancelled);
        }
        if answers.reading {
            // Created under the lock: it sees the end of the read under way.
            Next::Wait(answers.read.clone().notified_owned())
        } else {
            answers.reading = true;
            Next::Read
        }
    }

    /// Forgets the answer about `batch`: the next job of it reads again.
    pub(crate) fn forget(&self, batch: Uuid) {
        let mut batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(answers) = batches.get_mut(&batch) {
            answers.latest = None;
        }
    }

    async fn read(&self, queue: &RedisQueue, batch: Uuid) -> redjob::Result<bool> {
        let sent = Instant::now();
        let answer = WorkerQueue::of(queue).batch_cancelled(batch).await;
        let mut batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        let answers = batches.entry(batch).or_default();
        answers.reading = false;
        if let Ok(cancelled) = answer {
            answers.latest = Some((sent, cancelled));
        }
        answers.read.notify_waiters();
        answer
    }
}

/// The answer `latest` gives a job that starts at `since`: a batch once cancelled stays so;
/// one not cancelled is taken at its word for [`FRESH`] after the read was sent.
fn fresh(latest: Option<(Instant, bool)>, since: Instant) -> Option<bool> {
    match latest? {
        (_, true) => Some(true),
        (sent, cancelled) if sent + FRESH >= since => Some(cancelled),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_answers_for_fresh_after_it_was_sent_and_a_cancellation_for_ever() {
        let sent = Instant::now();
        let later = sent + FRESH + Duration::from_millis(1);
        assert_eq!(fresh(None, sent), None);
        assert_eq!(fresh(Some((sent, false)), sent + FRESH), Some(false));
        assert_eq!(fresh(Some((sent, false)), later), None);
        assert_eq!(fresh(Some((sent, true)), later), Some(true));
    }

    #[test]
    fn a_batch_ids_hash_depends_on_each_of_its_halves() {
        use std::hash::BuildHasher;
        let hash =
            |id: u128| BuildHasherDefault::<BatchIdHasher>::default().hash_one(Uuid::from_u128(id));
        let id = Uuid::new_v4().as_u128();
        assert_ne!(hash(id), hash(id ^ 1));
        assert_ne!(hash(id), hash(id ^ (1 << 100)));
        assert_eq!(hash(id), hash(id));
    }

    #[test]
    fn known_answers_only_from_a_fresh_read() {
        let batches = CancelledBatches::default();
        let (batch, sent) = (Uuid::new_v4(), Instant::now());
        assert_eq!(batches.known(batch, sent), None);
        batches.batches.lock().unwrap().insert(
            batch,
            Answers {
                latest: Some((sent, false)),
                ..Answers::default()
            },
        );
        assert_eq!(batches.known(batch, sent), Some(false));
        assert_eq!(batches.known(batch, sent + FRESH * 2), None);
        batches.forget(batch);
        assert_eq!(batches.known(batch, sent), None);
    }
}
