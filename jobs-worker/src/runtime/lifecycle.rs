//! One lifecycle for everything that runs beside a worker's job loop (River's
//! `startstop.Service`, Oban's plugins): each service is started by its module's `start`,
//! which returns it running, and is stopped through [`Service::stop`]. [`Started`] keeps them
//! in the order they started and stops them in the reverse, so that a service stops only
//! after every service started after it, which may use it, has stopped.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What stopping a service returns: complete once the service has stopped.
pub(crate) type Stopping = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service that runs beside the job loop, started. `Sync`: the job loop's tasks share the
/// worker's services while they run.
pub(crate) trait Service: Send + Sync {
    /// Stops the service; the future completes once it has stopped.
    fn stop(self: Box<Self>) -> Stopping;
}

/// The services of a worker, in the order they started.
#[derive(Default)]
pub(crate) struct Started(Vec<(Cow<'static, str>, Box<dyn Service>)>);

impl Started {
    /// Adds `service`, started now, under `name` (for the logs of the stop).
    pub(crate) fn add(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        service: impl Service + 'static,
    ) {
        self.0.push((name.into(), Box::new(service)));
    }

    /// Adds `service` when it was started (a service a setting turns on).
    pub(crate) fn add_if(&mut self, name: &'static str, service: Option<impl Service + 'static>) {
        if let Some(service) = service {
            self.add(name, service);
        }
    }

    /// Stops every service, the last started first, each once the one after it has stopped.
    pub(crate) async fn stop(self) {
        for (name, service) in self.0.into_iter().rev() {
            tracing::debug!(service = %name, "stopping");
            service.stop().await;
        }
    }
}

/// A task that holds nothing to hand over: stopping it aborts it.
pub(crate) struct Aborted(pub(crate) JoinHandle<()>);

impl Service for Aborted {
    fn stop(self: Box<Self>) -> Stopping {
        self.0.abort();
        Box::pin(std::future::ready(()))
    }
}

/// A task that stops at its own pace once told: stopping it cancels its token and waits for
/// it to end.
pub(crate) struct Cancelled {
    pub(crate) task: JoinHandle<()>,
    pub(crate) stop: CancellationToken,
}

impl Service for Cancelled {
    fn stop(self: Box<Self>) -> Stopping {
        self.stop.cancel();
        Box::pin(async move {
            let _ = self.task.await;
        })
    }
}

/// A service that stops when dropped (its `Drop` ends its task): stopping it drops it.
pub(crate) struct Dropped<T: Send + Sync>(pub(crate) T);

impl<T: Send + Sync> Service for Dropped<T> {
    fn stop(self: Box<Self>) -> Stopping {
        drop(self);
        Box::pin(std::future::ready(()))
    }
}
