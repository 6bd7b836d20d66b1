//! The order service: its HTTP API and, unless `--no-worker`, workers embedded beside it that
//! share its pool and its shutdown.
//!
//! ```text
//! DATABASE_URL=postgres://... CARRIER_URL=http://... cargo run -p orders-service --bin orders-service
//! ```
//!
//! The first SIGTERM or SIGINT stops it gracefully: the API finishes its requests and the
//! workers their jobs; a second one exits at once.

use std::process::ExitCode;

use orders_service::api::{self, Api};
use orders_service::carrier::Carrier;
use orders_service::orders::Orders;
use orders_service::{connect_database, jobs, Settings};
use redjob::outbox::Relay;
use redjob::RedisQueue;
use redjob_worker::{Worker, WorkerConfig, CONFIG_EXIT_CODE};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    redjob_worker::logging::init(false);
    let embedded = !std::env::args().skip(1).any(|arg| arg == "--no-worker");
    match serve(embedded).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure { message, status }) => {
            eprintln!("orders-service: {message}");
            ExitCode::from(status)
        }
    }
}

/// Why the service stopped otherwise than on a signal, and its exit status.
struct Failure {
    message: String,
    status: u8,
}

impl Failure {
    fn config(message: impl ToString) -> Failure {
        Failure {
            message: message.to_string(),
            status: CONFIG_EXIT_CODE,
        }
    }
}

async fn serve(embedded: bool) -> Result<(), Failure> {
    let settings = Settings::from_env().map_err(Failure::config)?;
    let pool = connect_database(&settings.database_url)
        .await
        .map_err(|err| Failure::config(format!("cannot use PostgreSQL: {err}")))?;
    let queue = RedisQueue::open(&settings.redis_url).map_err(Failure::config)?;
    let orders = Orders::postgres(pool.clone());
    let listener = tokio::net::TcpListener::bind(&settings.listen)
        .await
        .map_err(|err| Failure::config(format!("cannot listen on {}: {err}", settings.listen)))?;

    // One shutdown for the API and the workers: the worker binary's signal handling.
    let stop = CancellationToken::new();
    tokio::spawn(redjob_worker::stop_on_signals(stop.clone()));

    let worker = if embedded {
        let config = WorkerConfig {
            queues: jobs::QUEUES.map(String::from).to_vec(),
            concurrency: 10,
            ..WorkerConfig::default()
        };
        let worker = Worker::new(config, queue.clone())
            .map_err(|err| Failure::config(err.to_string()))?
            .state(orders.clone())
            .state(Carrier::new(&settings.carrier_url))
            // Moves the jobs that orders commit into the outbox to Redis.
            .relay(Relay::new(pool.clone(), queue.clone()));
        let stop = stop.clone();
        Some(tokio::spawn(async move {
            let exit = worker.run_until(stop.clone().cancelled_owned()).await;
            // A worker that refuses to start (or stops) takes the API down with it.
            stop.cancel();
            exit
        }))
    } else {
        None
    };

    tracing::info!(listen = %settings.listen, embedded, "serving");
    let app = api::router(Api { orders, queue });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(stop.clone().cancelled_owned())
        .await;
    stop.cancel();
    if let Some(worker) = worker {
        match worker.await {
            Ok(Ok(_exit)) => {}
            Ok(Err(err)) => {
                return Err(Failure {
                    message: err.to_string(),
                    status: err.exit_code(),
                })
            }
            Err(panicked) => {
                return Err(Failure {
                    message: format!("the worker panicked: {panicked}"),
                    status: 1,
                })
            }
        }
    }
    served.map_err(|err| Failure {
        message: format!("the API failed: {err}"),
        status: 1,
    })
}
