//! Dispatching in tests: through a test server's handle, and it must succeed.

use redjob::status::Tracked;
use redjob::{Bulk, Job, PendingDispatch, RedisQueue};
use std::future::Future;
use uuid::Uuid;

/// Sends a dispatch through a given handle and unwraps the result, in place of the
/// `.via(&queue).await.unwrap()` every test set-up would otherwise write out.
///
/// ```no_run
/// # async fn demo(queue: redjob::RedisQueue) {
/// use redjob::Job;
/// use tests::SentVia;
/// let uuid = examples::Noop {}.dispatch().on_queue("q").sent_via(&queue).await;
/// # let _ = uuid;
/// # }
/// ```
pub trait SentVia {
    /// Pushes the job through `queue` and returns its uuid; panics when the dispatch fails.
    fn sent_via(self, queue: &RedisQueue) -> impl Future<Output = Uuid> + Send;
}

impl<J: Job> SentVia for PendingDispatch<J> {
    async fn sent_via(self, queue: &RedisQueue) -> Uuid {
        self.via(queue)
            .await
            .expect("dispatch through the test server")
    }
}

/// Sends a tracked dispatch through a given handle and unwraps the result: its [`Tracked`]
/// handle, in place of `.via(&queue).track().await.unwrap()`.
pub trait TrackedVia<J: Job> {
    /// Pushes the job, tracked, through `queue`; panics when the dispatch fails.
    fn tracked_via(self, queue: &RedisQueue) -> impl Future<Output = Tracked<J>> + Send;
}

impl<J: Job> TrackedVia<J> for PendingDispatch<J> {
    async fn tracked_via(self, queue: &RedisQueue) -> Tracked<J> {
        self.via(queue)
            .track()
            .await
            .expect("tracked dispatch through the test server")
    }
}

/// Sends `jobs` through `queue` in one bulk dispatch and returns their uuids, in order, as
/// the workers log them; panics when the dispatch fails.
pub async fn sent_in_bulk<J: Job>(
    queue: &RedisQueue,
    jobs: impl IntoIterator<Item = PendingDispatch<J>>,
) -> Vec<String> {
    let mut bulk = Bulk::via(queue);
    for job in jobs {
        bulk.add(job).expect("the job serializes");
    }
    bulk.send()
        .await
        .expect("the bulk dispatch succeeds")
        .iter()
        .map(|sent| sent.uuid().to_string())
        .collect()
}
