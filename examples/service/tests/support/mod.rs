//! A carrier's shipping API for the tests: answers 503 to its first calls, as a carrier having
//! a bad minute does, refuses anvils with 422, and books everything else.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The item the carrier refuses to ship.
pub(crate) const REFUSED_ITEM: &str = "anvil";

/// A carrier's API, served on a free loopback port until the test's runtime ends.
#[derive(Clone)]
pub(crate) struct FakeCarrier {
    url: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

/// One call the carrier got.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// The `Idempotency-Key` header.
    pub(crate) key: String,
    /// The order's id in the body.
    pub(crate) order_id: i64,
    /// How the carrier answered.
    pub(crate) status: u16,
}

#[derive(Clone)]
struct Carrier {
    unavailable_first: usize,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl FakeCarrier {
    /// A carrier that answers 503 to its first `unavailable_first` calls.
    pub(crate) async fn start(unavailable_first: usize) -> FakeCarrier {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let carrier = Carrier {
            unavailable_first,
            calls: calls.clone(),
        };
        let app = Router::new()
            .route("/shipments", post(ship))
            .with_state(carrier);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeCarrier { url, calls }
    }

    /// Its base URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The calls it got, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls for one order.
    pub(crate) fn calls_for(&self, order_id: i64) -> Vec<Call> {
        let calls = self.calls();
        calls
            .into_iter()
            .filter(|c| c.order_id == order_id)
            .collect()
    }
}

async fn ship(
    State(carrier): State<Carrier>,
    headers: HeaderMap,
    Json(shipment): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let order_id = shipment["order_id"].as_i64().unwrap_or_default();
    let mut calls = carrier.calls.lock().unwrap();
    let (status, body) = if calls.len() < carrier.unavailable_first {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": "try again"}),
        )
    } else if shipment["item"] == REFUSED_ITEM {
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"error": "too heavy to ship"}),
        )
    } else {
        (
            StatusCode::CREATED,
            json!({"tracking": format!("TRK-{order_id}")}),
        )
    };
    calls.push(Call {
        key: headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        order_id,
        status: status.as_u16(),
    });
    (status, Json(body))
}
