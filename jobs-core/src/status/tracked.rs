//! A tracked dispatch, and the handle it returns: the job's uuid, with its status, its
//! outcome and its cancellation at hand.

use serde::de::DeserializeOwned;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::ops::Deref;
use std::pin::Pin;
use std::time::Duration;
use uuid::Uuid;

use crate::dispatch::PendingDispatch;
use crate::error::Result;
use crate::job::Job;
use crate::queue::RedisQueue;
use crate::status::cancel::Cancelled;
use crate::status::record::JobStatus;
use crate::status::wait::WaitError;
use crate::status::DEFAULT_RESULT_TTL;

impl<J: Job> PendingDispatch<J> {
    /// Tracks this job (see [`crate::status`]): it keeps a status record, its progress and
    /// its result, for `result_ttl` seconds after it settles (its type's, else
    /// [`DEFAULT_RESULT_TTL`]). Awaited, the dispatch returns a [`Tracked`] handle instead
    /// of the bare uuid.
    ///
    /// ```no_run
    /// use redjob::{job, Job, JobContext, JobResult};
    /// use serde::{Deserialize, Serialize};
    /// use std::time::Duration;
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Resize { image: u64 }
    ///
    /// #[job]
    /// impl Job for Resize {
    ///     type Output = String;
    ///     async fn handle(&self, _ctx: &JobContext) -> JobResult<String> {
    ///         Ok(format!("thumbs/{}.webp", self.image))
    ///     }
    /// }
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let job = Resize { image: 7 }.dispatch().track().await?;
    /// let path: String = job.wait(Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub fn track(mut self) -> TrackedDispatch<J> {
        self.track = Some(J::options().track.unwrap_or(DEFAULT_RESULT_TTL));
        TrackedDispatch(self)
    }
}

/// A dispatch that tracks its job ([`PendingDispatch::track`]); await it to push the job, or
/// write it in a transaction with `in_transaction` (feature `postgres`).
#[must_use = "a dispatch does nothing until it is awaited"]
pub struct TrackedDispatch<J: Job>(PendingDispatch<J>);

impl<J: Job> TrackedDispatch<J> {
    /// The dispatch, tracking its job, for the capabilities that send it their own way.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn into_dispatch(self) -> PendingDispatch<J> {
        self.0
    }
}

impl<J: Job> IntoFuture for TrackedDispatch<J> {
    type Output = Result<Tracked<J>>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Tracked<J>>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        let sent = self.0.send_through();
        Box::pin(async move {
            let (uuid, queue) = sent.await?;
            Ok(queue.tracked(uuid))
        })
    }
}

impl RedisQueue {
    /// The typed handle of the tracked job `uuid`, a `J`, as its dispatch returned it: for a
    /// later request that has only the uuid (a receipt page, a cancel button). Nothing is
    /// read until it is asked; a uuid that names no tracked job reads as
    /// [`JobState::Unknown`](crate::status::JobState::Unknown).
    ///
    /// ```no_run
    /// # use redjob::{job, Job, JobContext, JobResult, RedisQueue};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct Resize { image: u64 }
    /// # #[job] impl Job for Resize {
    /// #     type Output = String;
    /// #     async fn handle(&self, _: &JobContext) -> JobResult<String> { Ok(String::new()) }
    /// # }
    /// # async fn demo(queue: RedisQueue, uuid: uuid::Uuid) -> Result<(), Box<dyn std::error::Error>> {
    /// let resize = queue.tracked::<Resize>(uuid);
    /// let path: String = resize.wait(std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub fn tracked<J: Job>(&self, uuid: Uuid) -> Tracked<J> {
        Tracked {
            uuid,
            queue: self.clone(),
            job: PhantomData,
        }
    }
}

/// A tracked job, as its dispatch returns it: its uuid (it derefs to it), and the handle it
/// was pushed through, to read its status, wait for its output, or cancel it.
#[derive(Debug, Clone)]
pub struct Tracked<J: Job> {
    uuid: Uuid,
    queue: RedisQueue,
    job: PhantomData<fn() -> J>,
}

impl<J: Job> Tracked<J> {
    /// The job's uuid.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// The job's status now ([`RedisQueue::status`]).
    pub async fn status(&self) -> Result<JobStatus> {
        self.queue.status(self.uuid).await
    }

    /// Asks the job to stop ([`RedisQueue::cancel`]).
    pub async fn cancel(&self) -> Result<Cancelled> {
        self.queue.cancel(self.uuid).await
    }

    /// Waits up to `timeout` for the job to be done and returns its output
    /// ([`RedisQueue::wait`]).
    pub async fn wait(&self, timeout: Duration) -> std::result::Result<J::Output, WaitError>
    where
        J::Output: DeserializeOwned,
    {
        let status = self.queue.wait(self.uuid, timeout).await?;
        if let (None, Some(error)) = (&status.result, &status.error) {
            return Err(WaitError::Result(error.clone()));
        }
        let result = status.result.unwrap_or(serde_json::Value::Null);
        serde_json::from_value(result).map_err(|err| WaitError::Result(err.to_string()))
    }
}

impl<J: Job> Deref for Tracked<J> {
    type Target = Uuid;

    fn deref(&self) -> &Uuid {
        &self.uuid
    }
}
