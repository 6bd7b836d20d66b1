//! The tasks that run beside a worker's job loop: started together before its first fetch,
//! stopped in order after its last job settled.

use crate::listeners::Listeners;
use redjob::middleware::Layer;
use redjob::queue::keys::QueueKeys;
use redjob::{RedisQueue, State};
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::WorkerConfig;
use crate::runtime::acker::Acker;
use crate::runtime::cancels::{self, CancelRequests};
use crate::runtime::control::{self, Control, Publishing};
use crate::runtime::fetcher::Fetcher;
use crate::runtime::hooks;
use crate::runtime::lease::{self, Running};
use crate::runtime::processor::Processor;
use crate::runtime::scheduler;
use crate::runtime::settler::Settler;
use crate::runtime::waker::Waker;
use crate::runtime::watchdog::{Guarded, Watchdog};
use crate::stats::Stats;

/// A worker's running services, and what its job loop uses of them.
pub(crate) struct Services {
    /// Paused queues and restart requests, and the counters published for operators.
    pub(crate) control: Arc<Control>,
    /// Reserves jobs.
    pub(crate) fetcher: Arc<Fetcher>,
    /// Wakes an idle worker for a push or a due job.
    pub(crate) waker: Waker,
    /// Runs and settles jobs; one for every job task, shared rather than copied per job.
    pub(crate) processor: Arc<Processor>,
    /// Interrupts running handlers, which puts their jobs back on their queues.
    pub(crate) interrupt: CancellationToken,
    acker: Acker,
    lease: JoinHandle<()>,
    /// Looks for `failed()` hooks owed by dead workers.
    hooks: JoinHandle<()>,
    /// Follows cancel requests.
    cancels: cancels::Follower,
    watchdog: Watchdog,
    publishing: Publishing,
    queue_sizes: Option<JoinHandle<()>>,
    /// Fires the schedules' ticks, with --schedule.
    scheduler: Option<JoinHandle<()>>,
}

impl Services {
    /// Starts every service of a worker with `config` on `queue`. `stop` is the worker's stop
    /// token, which the watchdog cancels when it takes over.
    pub(crate) async fn start(
        queue: &RedisQueue,
        config: &Arc<WorkerConfig>,
        middleware: &[Layer],
        state: &State,
        listeners: &Listeners,
        stats: &Arc<Stats>,
        stop: &CancellationToken,
    ) -> Services {
        let queues: Vec<Arc<QueueKeys>> = config
            .queues
            .iter()
            .map(|name| Arc::new(queue.queue_keys(name)))
            .collect();
        let control = Arc::new(Control::new(&config.name));
        let running = Arc::new(Running::default());
        let publishing = control::start(
            queue.clone(),
            control.clone(),
            running.clone(),
            stats.clone(),
            config.clone(),
        )
        .await;
        let queue_sizes =
            crate::prometheus::refresh_queue_sizes(queue.clone(), config.queues.clone());
        let fetcher = Arc::new(Fetcher::new(
            queue.clone(),
            queues.clone(),
            config.retry_after,
            config.groups,
            control.clone(),
        ));
        let waker = Waker::start(queue, &queues, config.sleep, control.clone());
        let acker = Acker::start(queue.clone(), config.retry_after);
        let lease = lease::start(queue.clone(), running.clone(), config.retry_after);
        let hooks = hooks::start(queue.clone(), config.clone(), state.clone());
        let cancel_requests = Arc::new(CancelRequests::default());
        let cancels = cancels::start(queue, cancel_requests.clone(), running.clone()).await;
        let settler = Settler {
            queue: queue.clone(),
            acks: acker.sender(),
            retry_after: config.retry_after,
            stats: stats.clone(),
            control: control.clone(),
        };
        let processor = Arc::new(Processor {
            settler: settler.clone(),
            running: running.clone(),
            config: config.clone(),
            middleware: middleware.into(),
            listeners: listeners.clone(),
            redis: Arc::new(queue.clone()),
            state: state.clone(),
            cancelled: Default::default(),
            cancels: cancel_requests,
            worker: format!(
                "{}@{}",
                config.name,
                gethostname::gethostname().to_string_lossy()
            ),
        });
        let interrupt = CancellationToken::new();
        let watchdog = Watchdog::start(Guarded {
            running,
            settler,
            queue: queue.clone(),
            acks: acker.sender(),
            stop: stop.clone(),
            interrupt: interrupt.clone(),
            on_blocked: config.on_blocked,
            cancel_grace: config.cancel_grace,
        });
        let scheduler = match config.schedule {
            true => scheduler::start(queue.clone(), redjob::schedule::defined(), stop.clone()),
            false => None,
        };
        Services {
            scheduler,
            control,
            fetcher,
            waker,
            processor,
            interrupt,
            acker,
            lease,
            hooks,
            cancels,
            watchdog,
            publishing,
            queue_sizes,
        }
    }

    /// Stops the services once no job runs any more: the last acknowledgements are sent,
    /// then the last counts are published and the heartbeat record removed.
    pub(crate) async fn stop(self) {
        self.lease.abort();
        self.hooks.abort();
        drop(self.cancels);
        if let Some(scheduler) = self.scheduler {
            scheduler.abort();
        }
        if let Some(queue_sizes) = self.queue_sizes {
            queue_sizes.abort();
        }
        // The acker closes once every sender is gone: the watchdog and the processor's settler
        // hold one.
        drop(self.watchdog);
        drop(self.processor);
        self.acker.close().await;
        self.publishing.close().await;
    }
}
