//! The order service's worker binary: every option of the queue's worker, with the state the
//! service's jobs read, built at run time. It takes jobs from the service's queues unless
//! `--queue` names others.
//!
//! ```text
//! DATABASE_URL=postgres://... CARRIER_URL=http://... cargo run -p orders-service --bin orders-worker
//! ```

use std::process::ExitCode;

use orders_service::carrier::Carrier;
use orders_service::orders::Orders;
use orders_service::{connect_database, jobs, Settings};
use redjob_worker::CONFIG_EXIT_CODE;

#[tokio::main]
async fn main() -> ExitCode {
    // Parsed first: --help and a bad option end here, before any connection.
    let command = redjob_worker::Command::from_args().default_queues(jobs::QUEUES);
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(err) => return refuse(err),
    };
    let pool = match connect_database(&settings.database_url).await {
        Ok(pool) => pool,
        Err(err) => return refuse(format!("cannot use PostgreSQL: {err}")),
    };
    command
        .relay_outbox(pool.clone())
        .state(Orders::postgres(pool))
        .state(Carrier::new(&settings.carrier_url))
        .run()
        .await
}

fn refuse(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("worker: {why}");
    ExitCode::from(CONFIG_EXIT_CODE)
}
