//! Plugins: what an application runs beside a worker's jobs, on the worker's lifecycle.

use redjob::async_trait;
use tokio_util::sync::CancellationToken;

/// Something a worker runs beside its jobs (Oban's plugins): checked before the worker takes
/// its first job, started with the worker's own services, and stopped with them after the
/// last job settled, in the reverse order of their start. The outbox relay is one
/// (`Worker::relay`, feature `postgres`).
///
/// ```
/// use redjob_worker::Plugin;
/// use tokio_util::sync::CancellationToken;
///
/// /// Logs a line every minute while the worker runs.
/// struct Heartbeat;
///
/// #[redjob::async_trait]
/// impl Plugin for Heartbeat {
///     fn name(&self) -> String {
///         "heartbeat".into()
///     }
///
///     async fn run(self: Box<Self>, stop: CancellationToken) {
///         let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
///         loop {
///             tokio::select! {
///                 _ = every.tick() => tracing::info!("still here"),
///                 () = stop.cancelled() => return,
///             }
///         }
///     }
/// }
/// # fn demo(queue: redjob::RedisQueue) -> Result<(), redjob_worker::WorkerError> {
/// let worker = redjob_worker::Worker::new(Default::default(), queue)?.plugin(Heartbeat);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// Its name, in the worker's logs and in the reason of a refused start.
    fn name(&self) -> String;

    /// Checks, before the worker takes its first job (and before it waits for Redis), that
    /// the plugin can run. An error refuses the start: `Worker::run` returns
    /// [`WorkerError::Plugin`](crate::WorkerError::Plugin) with it, and the binary exits with
    /// status 78. A passing check by default.
    async fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// Runs until `stop` is cancelled, then returns: the worker's stop waits for it.
    async fn run(self: Box<Self>, stop: CancellationToken);
}
