//! The services that run beside a worker's job loop: [`Services::start`] starts them in one
//! order, before the first fetch, and [`Services::stop`] stops them in the reverse, after the
//! last job settled ([`lifecycle`](crate::runtime::lifecycle)).

use crate::listeners::Listeners;
use redjob::middleware::Layer;
use redjob::queue::keys::QueueKeys;
use redjob::{RedisQueue, State};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::config::WorkerConfig;
use crate::plugin::Plugin;
use crate::runtime::acker::Acker;
use crate::runtime::cancels::{self, CancelRequests};
use crate::runtime::control::{self, Control};
use crate::runtime::fetcher::Fetcher;
use crate::runtime::hooks;
use crate::runtime::lease::{self, Running};
use crate::runtime::lifecycle::{Aborted, Cancelled, Dropped, Started};
use crate::runtime::processor::Processor;
use crate::runtime::scheduler;
use crate::runtime::settler::Settler;
use crate::runtime::waits;
use crate::runtime::waker::Waker;
use crate::runtime::watchdog::{Guarded, Watchdog};
use crate::stats::Stats;

/// What a worker starts its services with.
pub(crate) struct Start<'a> {
    pub(crate) queue: &'a RedisQueue,
    pub(crate) config: &'a Arc<WorkerConfig>,
    pub(crate) middleware: &'a [Layer],
    pub(crate) state: &'a State,
    pub(crate) listeners: &'a Listeners,
    pub(crate) stats: &'a Arc<Stats>,
    /// The worker's stop token, which the watchdog cancels when it takes over.
    pub(crate) stop: &'a CancellationToken,
    /// The application's plugins (the outbox relay among them).
    pub(crate) plugins: Vec<Box<dyn Plugin>>,
}

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
    /// Everything that runs beside the job loop, in the order it started.
    started: Started,
}

impl Services {
    /// Starts every service of a worker, in this order: publishing (the heartbeat, counters
    /// and operators' requests, read once before the first fetch), the `--wait` thresholds'
    /// writer, the plugins, the queue-size gauges, the acker, lease renewal, `failed()` hooks
    /// owed by dead workers, cancel requests, the watchdog, and the scheduler (`--schedule`).
    /// They stop in the reverse order: the publishing's last counts come after the acker's
    /// last acknowledgements, which come after every service that acknowledges.
    pub(crate) async fn start(start: Start<'_>) -> Services {
        let Start {
            queue,
            config,
            middleware,
            state,
            listeners,
            stats,
            stop,
            plugins,
        } = start;
        let mut started = Started::default();
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
        started.add("publishing", publishing);
        let waits = waits::write(queue, &config.waits, stop).await;
        started.add_if("wait thresholds", waits.map(Aborted));
        for plugin in plugins {
            let name = plugin.name();
            let stop = CancellationToken::new();
            let task = tokio::spawn(plugin.run(stop.clone()));
            started.add(name, Cancelled { task, stop });
        }
        let queue_sizes =
            crate::prometheus::refresh_queue_sizes(queue.clone(), config.queues.clone());
        started.add_if("queue sizes", queue_sizes.map(Aborted));
        let acker = Acker::start(queue.clone(), config.retry_after, config.durable_acks);
        let acks = acker.sender();
        started.add("acker", acker);
        let lease = lease::start(queue.clone(), running.clone(), config.retry_after);
        started.add("lease renewal", Aborted(lease));
        let hooks = hooks::start(queue.clone(), config.clone(), state.clone());
        started.add("hooks", Aborted(hooks));
        let cancel_requests = Arc::new(CancelRequests::default());
        let cancels = cancels::start(queue, cancel_requests.clone(), running.clone()).await;
        started.add("cancel requests", Dropped(cancels));
        let settler = Settler {
            queue: queue.clone(),
            durable_acks: config.durable_acks,
            acks: acks.clone(),
            retry_after: config.retry_after,
            stats: stats.clone(),
            control: control.clone(),
        };
        let interrupt = CancellationToken::new();
        let watchdog = Watchdog::start(Guarded {
            running: running.clone(),
            settler: settler.clone(),
            queue: queue.clone(),
            acks,
            stop: stop.clone(),
            interrupt: interrupt.clone(),
            on_blocked: config.on_blocked,
            cancel_grace: config.cancel_grace,
        });
        started.add("watchdog", Dropped(watchdog));
        let scheduler = match config.schedule {
            true => scheduler::start(queue.clone(), redjob::schedule::defined(), stop.clone()),
            false => None,
        };
        started.add_if("scheduler", scheduler.map(Aborted));
        let fetcher = Arc::new(Fetcher::new(
            queue.clone(),
            queues.clone(),
            config.retry_after,
            config.groups,
            control.clone(),
        ));
        let waker = Waker::start(queue, &queues, config.sleep, control.clone());
        let processor = Arc::new(Processor {
            settler,
            running,
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
            stopping: stop.clone(),
        });
        Services {
            control,
            fetcher,
            waker,
            processor,
            interrupt,
            started,
        }
    }

    /// Stops the services once no job runs any more, the last started first.
    pub(crate) async fn stop(self) {
        // The job loop's parts go first: the processor's settler holds an acknowledgement
        // sender, and the acker stops once every sender is gone.
        let Services {
            processor,
            waker,
            started,
            ..
        } = self;
        drop(processor);
        drop(waker);
        started.stop().await;
    }
}
