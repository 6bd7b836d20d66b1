//! The HTTP API: `POST /orders` takes an order and queues its jobs, `GET /orders/{id}` shows
//! where it is, `GET /health` answers while the service runs.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redjob::RedisQueue;
use serde::Deserialize;

use crate::orders::{Order, Orders, PlaceError};

/// Most items of one kind in one order.
pub const MAX_QUANTITY: i32 = 100;

/// What the handlers share: the orders (the same handle the workers are given) and the queue
/// they dispatch to.
#[derive(Clone)]
pub struct Api {
    /// The orders.
    pub orders: Orders,
    /// Where the handlers dispatch jobs.
    pub queue: RedisQueue,
}

/// A new order, as `POST /orders` takes it.
#[derive(Debug, Deserialize)]
pub struct NewOrder {
    /// What is ordered.
    pub item: String,
    /// How many, 1 to [`MAX_QUANTITY`].
    pub quantity: i32,
}

/// The service's routes.
pub fn router(api: Api) -> Router {
    Router::new()
        .route("/orders", post(place))
        .route("/orders/{id}", get(show))
        .route("/health", get(|| async { "ok" }))
        .with_state(api)
}

/// Takes the order with its first job, in one transaction: answers `202 Accepted` with the
/// order. Redis need not be up: the job waits in the outbox until a relay moves it.
async fn place(State(api): State<Api>, Json(new): Json<NewOrder>) -> Result<Response, ApiError> {
    if new.item.trim().is_empty() {
        return Err(ApiError::Invalid("item is empty".into()));
    }
    if !(1..=MAX_QUANTITY).contains(&new.quantity) {
        return Err(ApiError::Invalid(format!(
            "quantity must be 1 to {MAX_QUANTITY}"
        )));
    }
    let order = api
        .orders
        .place(new.item.trim(), new.quantity, &api.queue)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(order)).into_response())
}

async fn show(State(api): State<Api>, Path(id): Path<i64>) -> Result<Json<Order>, ApiError> {
    api.orders
        .get(id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
enum ApiError {
    #[error("{0}")]
    Invalid(String),
    #[error("no such order")]
    NotFound,
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Place(#[from] PlaceError),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::Database(err) => {
                tracing::error!(error = %err, "database error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ApiError::Place(err) => {
                tracing::error!(error = %err, "cannot place the order");
                StatusCode::SERVICE_UNAVAILABLE
            }
        };
        let body = serde_json::json!({ "error": self.to_string() });
        (status, Json(body)).into_response()
    }
}
