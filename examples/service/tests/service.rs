//! The service as its operators run it, against a real PostgreSQL and a real Redis, each a
//! private server of the test's own: `orders-service` with its workers embedded, then
//! `orders-service --no-worker` beside an `orders-worker` process.

mod support;

use std::process::Command;
use std::time::Duration;

use orders_service::jobs::QUEUES;
use serde_json::{json, Value};
use support::{FakeCarrier, REFUSED_ITEM};
use tests::worker_process::WorkerProcess;
use tests::{free_port, wait_for, wait_until, TestPostgres, TestRedis, CLOSED_PORT};

const LONG: Duration = Duration::from_secs(60);

/// The service's programs, and where they find PostgreSQL, Redis and the carrier.
struct Setup {
    postgres: TestPostgres,
    redis: TestRedis,
    carrier: FakeCarrier,
    /// The test's own reads of the service's database; it connects on first use, once the
    /// service has made its tables.
    pool: sqlx::PgPool,
}

impl Setup {
    async fn start(unavailable_first: usize) -> Setup {
        let postgres = TestPostgres::start();
        let pool = sqlx::PgPool::connect_lazy(&postgres.url()).expect("a valid URL");
        Setup {
            postgres,
            redis: TestRedis::start(),
            carrier: FakeCarrier::start(unavailable_first).await,
            pool,
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .env("DATABASE_URL", self.postgres.url())
            .env("REDIS_URL", self.redis.url())
            .env("CARRIER_URL", self.carrier.url())
            .env("RUST_LOG", "info");
        command
    }

    /// Starts `orders-service` with `args`; returns it and its API's base URL once it answers.
    async fn service(&self, args: &[&str]) -> (WorkerProcess, String) {
        let listen = format!("127.0.0.1:{}", free_port());
        let mut command = self.command(env!("CARGO_BIN_EXE_orders-service"));
        command.args(args).env("LISTEN", &listen);
        let service = WorkerProcess::spawn(command);
        let base = format!("http://{listen}");
        let health = format!("{base}/health");
        wait_until(LONG, "the API answers", || async {
            reqwest::get(&health).await.is_ok_and(|r| r.status() == 200)
        })
        .await;
        (service, base)
    }

    /// Starts `orders-worker` on the service's queues.
    fn worker(&self) -> WorkerProcess {
        let mut command = self.command(env!("CARGO_BIN_EXE_orders-worker"));
        command.args(["--queue", &QUEUES.join(","), "--json"]);
        WorkerProcess::spawn(command)
    }

    /// The order's row, read straight from PostgreSQL.
    async fn row(&self, id: i64) -> (String, Option<String>, Option<String>) {
        sqlx::query_as("SELECT status, tracking, problem FROM orders WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }
}

async fn place(base: &str, item: &str, quantity: i32) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/orders"))
        .json(&json!({ "item": item, "quantity": quantity }))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn wait_for_status(base: &str, id: i64, status: &str) -> Value {
    let url = format!("{base}/orders/{id}");
    wait_for(LONG, format!("order {id} is {status}"), || async {
        let order: Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
        (order["status"] == status).then_some(order)
    })
    .await
}

async fn stop(process: &mut WorkerProcess) {
    process.signal("TERM");
    let status = process.wait_exit(LONG).await;
    assert_eq!(status.code(), Some(0), "{:#?}", process.lines());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_placed_over_http_is_confirmed_and_shipped_by_the_workers_embedded_in_the_service()
{
    let setup = Setup::start(2).await;
    let (mut service, base) = setup.service(&[]).await;

    let (status, placed) = place(&base, "teapot", 2).await;
    assert_eq!(status, 202, "{placed}");
    let id = placed["id"].as_i64().unwrap();
    let shipped = wait_for_status(&base, id, "shipped").await;
    assert_eq!(shipped["tracking"], format!("TRK-{id}"));
    // The jobs read and wrote the row in PostgreSQL.
    assert_eq!(
        setup.row(id).await,
        ("shipped".into(), Some(format!("TRK-{id}")), None)
    );
    // Two 503s, retried with backoff, then booked; always with the order's idempotency key.
    let calls = setup.carrier.calls_for(id);
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        [503, 503, 201]
    );
    assert!(calls.iter().all(|c| c.key == format!("order-{id}")));

    // A refused shipment fails at once; the failed() hook marks the row through the pool.
    let (_, refused) = place(&base, REFUSED_ITEM, 1).await;
    let id = refused["id"].as_i64().unwrap();
    let failed = wait_for_status(&base, id, "shipping_failed").await;
    assert!(
        failed["problem"].as_str().unwrap().contains("too heavy"),
        "{failed}"
    );

    // A bad request is refused and queues nothing.
    let (status, _) = place(&base, "teapot", 0).await;
    assert_eq!(status, 422);
    let queue = setup.redis.queue();
    for name in QUEUES {
        assert_eq!(queue.size(name).await.unwrap().total(), 0, "{name}");
    }
    assert_eq!(
        tests::outbox_rows(&setup.pool).await,
        0,
        "every job was relayed"
    );

    stop(&mut service).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_without_workers_queues_orders_that_an_orders_worker_process_ships() {
    let setup = Setup::start(1).await;
    let (mut service, base) = setup.service(&["--no-worker"]).await;

    let (status, placed) = place(&base, "kettle", 3).await;
    assert_eq!(status, 202, "{placed}");
    let id = placed["id"].as_i64().unwrap();
    // Nothing relays or runs it yet: the order waits, its first job committed with it into
    // the outbox, not yet in Redis.
    let queue = setup.redis.queue();
    assert_eq!(queue.size("orders").await.unwrap().total(), 0);
    assert_eq!(setup.row(id).await.0, "placed");
    assert_eq!(tests::outbox_rows(&setup.pool).await, 1);

    let mut worker = setup.worker();
    wait_for_status(&base, id, "shipped").await;
    assert_eq!(setup.carrier.calls_for(id).len(), 2, "one 503, then booked");
    assert_eq!(tests::outbox_rows(&setup.pool).await, 0);
    let jobs: Vec<String> = worker
        .events()
        .into_iter()
        .map(|e| e.status + " " + &e.job)
        .collect();
    for seen in ["DONE ConfirmOrder", "RELEASED ShipOrder", "DONE ShipOrder"] {
        assert!(jobs.iter().any(|j| j == seen), "{seen}: {jobs:#?}");
    }

    stop(&mut worker).await;
    stop(&mut service).await;
}

#[tokio::test]
async fn a_worker_that_cannot_use_its_database_refuses_to_start_in_one_line() {
    let redis = TestRedis::start();
    let mut worker = WorkerProcess::spawn({
        let mut command = Command::new(env!("CARGO_BIN_EXE_orders-worker"));
        command
            .env(
                "DATABASE_URL",
                format!("postgres://postgres@127.0.0.1:{CLOSED_PORT}/postgres"),
            )
            .env("REDIS_URL", redis.url())
            .env("CARRIER_URL", "http://127.0.0.1:1");
        command
    });
    worker.wait_refused(LONG, "cannot use PostgreSQL").await;
}
