//! The service's API and jobs through the inline fake: no Redis and no worker. The orders are
//! in a private PostgreSQL, and each job is dispatched in its order's transaction as in
//! production; the fake records it when that transaction commits, nothing reaches the outbox
//! table, and the fake runs the job when the test settles it. The carrier is a local HTTP
//! server.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use orders_service::api::{self, Api};
use orders_service::carrier::Carrier;
use orders_service::jobs::{ConfirmOrder, ShipOrder};
use orders_service::orders::{Order, Orders, Status};
use redjob::Job;
use redjob_worker::testing::{self, Inline, Outcome};
use support::{FakeCarrier, REFUSED_ITEM};
use tests::{outbox_rows, TestPostgres};
use tower::ServiceExt;

async fn place(app: &axum::Router, body: &str) -> (StatusCode, serde_json::Value) {
    let request = Request::post("/orders")
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// The service as the tests run it: orders in PostgreSQL, jobs run inline once their
/// transactions commit, the carrier given.
struct Service {
    _postgres: TestPostgres,
    pool: sqlx::PgPool,
    orders: Orders,
    flow: Inline,
    app: axum::Router,
}

impl Service {
    async fn start(carrier: &FakeCarrier) -> Service {
        let postgres = TestPostgres::start();
        let pool = orders_service::connect_database(&postgres.url())
            .await
            .unwrap();
        let orders = Orders::postgres(pool.clone());
        let flow = testing::inline()
            .state(orders.clone())
            .state(Carrier::new(carrier.url()));
        flow.transactions_in(&pool);
        let app = api::router(Api {
            orders: orders.clone(),
            queue: flow.handle(),
        });
        Service {
            _postgres: postgres,
            pool,
            orders,
            flow,
            app,
        }
    }
}

async fn order(orders: &Orders, id: i64) -> Order {
    orders.get(id).await.unwrap().expect("the order exists")
}

#[tokio::test]
async fn an_order_is_confirmed_and_shipped_through_the_fake_the_carrier_retried_until_it_answers() {
    let carrier = FakeCarrier::start(2).await;
    let service = Service::start(&carrier).await;
    let Service {
        pool,
        orders,
        flow,
        app,
        ..
    } = &service;

    let (status, placed) = place(app, r#"{"item": "teapot", "quantity": 2}"#).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
    let id = placed["id"].as_i64().unwrap();
    // Committed with the order, recorded as pushed; not run until the fake is settled.
    flow.assert_pushed_on::<ConfirmOrder>("orders");
    assert!(flow.ran().is_empty());
    assert_eq!(flow.unsettled(), 1);
    assert_eq!(order(orders, id).await.status, Status::Placed);

    // Runs ConfirmOrder, then the ShipOrder it committed with the confirmation.
    flow.settle().await;
    assert_eq!(flow.unsettled(), 0);
    flow.assert_pushed_on::<ShipOrder>("shipping");
    assert_eq!(
        outbox_rows(pool).await,
        0,
        "nothing reached the outbox table"
    );
    let shipped = order(orders, id).await;
    assert_eq!(shipped.status, Status::Shipped);
    assert_eq!(shipped.tracking.as_deref(), Some("TRK-1"));
    flow.assert_ran::<ConfirmOrder>();
    flow.assert_nothing_failed();
    let ship = flow
        .ran()
        .into_iter()
        .find(|ran| ran.job.job == ShipOrder::NAME)
        .expect("ShipOrder ran");
    let outcomes: Vec<&Outcome> = ship.runs.attempts.iter().map(|a| &a.outcome).collect();
    assert_eq!(outcomes.len(), 3, "two 503s, then booked: {outcomes:?}");
    assert!(matches!(outcomes[0], Outcome::Retried(_)), "{outcomes:?}");
    assert_eq!(outcomes[2], &Outcome::Done);
    let calls = carrier.calls_for(id);
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        [503, 503, 201]
    );
    assert!(calls.iter().all(|c| c.key == "order-1"), "{calls:?}");
}

#[tokio::test]
async fn a_refused_shipment_fails_at_once_and_its_failed_hook_marks_the_order() {
    let carrier = FakeCarrier::start(0).await;
    let service = Service::start(&carrier).await;
    let Service {
        orders, flow, app, ..
    } = &service;

    let body = format!(r#"{{"item": "{REFUSED_ITEM}", "quantity": 1}}"#);
    let (status, placed) = place(app, &body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
    flow.settle().await;
    let failed = order(orders, placed["id"].as_i64().unwrap()).await;
    assert_eq!(failed.status, Status::ShippingFailed);
    let problem = failed.problem.unwrap_or_default();
    assert!(
        problem.contains("refused") && problem.contains("too heavy"),
        "{problem}"
    );
    assert_eq!(carrier.calls().len(), 1, "a refusal is not retried");

    // A bad request queues nothing.
    let (status, error) = place(app, r#"{"item": "teapot", "quantity": 0}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    flow.settle().await;
    assert!(
        error["error"].as_str().unwrap().contains("quantity"),
        "{error}"
    );
    assert_eq!(flow.ran().len(), 2, "only the anvil's two jobs ran");
}

#[test]
fn the_outbox_migration_is_the_outbox_schema() {
    let migration = include_str!("../migrations/0002_redjob_outbox.sql");
    let schema = redjob::outbox::Outbox::default().schema();
    assert!(
        migration.ends_with(&schema),
        "migrations/0002_redjob_outbox.sql differs from Outbox::default().schema():\n{schema}"
    );
}
