//! The carrier's shipping API, over HTTP: `POST {base}/shipments` with the order, answered
//! `201 {"tracking": "..."}`. Carriers' APIs fail now and then; [`ShipOrder`] retries them.
//!
//! [`ShipOrder`]: crate::jobs::ShipOrder

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::orders::Order;

/// How long one call to the carrier may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The carrier's API: its base URL and an HTTP client (a pool of connections), shared by every
/// attempt as worker state (`ctx.state::<Carrier>()`).
#[derive(Debug, Clone)]
pub struct Carrier {
    base: String,
    http: reqwest::Client,
}

/// Why the carrier did not take a shipment.
#[derive(Debug, thiserror::Error)]
pub enum CarrierError {
    /// The carrier could not take it now (a 5xx answer, or no answer): worth trying again.
    #[error("the carrier is unavailable: {0}")]
    Unavailable(String),
    /// The carrier refused the shipment (a 4xx answer): trying again changes nothing.
    #[error("the carrier refused the shipment ({status}): {body}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// What the carrier said.
        body: String,
    },
}

#[derive(Serialize)]
struct Shipment<'a> {
    order_id: i64,
    item: &'a str,
    quantity: i32,
}

#[derive(Deserialize)]
struct Created {
    tracking: String,
}

impl Carrier {
    /// The carrier whose API is at `base` (`http://carrier.internal`, no trailing slash).
    pub fn new(base: impl Into<String>) -> Carrier {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .expect("an HTTP client with a timeout builds");
        Carrier {
            base: base.into().trim_end_matches('/').to_owned(),
            http,
        }
    }

    /// Books the shipment of `order`; its tracking number. The order's id is the
    /// idempotency key, so a retry after a lost answer books nothing twice.
    pub async fn ship(&self, order: &Order) -> Result<String, CarrierError> {
        let shipment = Shipment {
            order_id: order.id,
            item: &order.item,
            quantity: order.quantity,
        };
        let response = self
            .http
            .post(format!("{}/shipments", self.base))
            .header("Idempotency-Key", format!("order-{}", order.id))
            .json(&shipment)
            .send()
            .await
            .map_err(|err| CarrierError::Unavailable(with_causes(&err)))?;
        let status = response.status();
        if status.is_success() {
            let created: Created = response
                .json()
                .await
                .map_err(|err| CarrierError::Unavailable(with_causes(&err)))?;
            return Ok(created.tracking);
        }
        let body = response.text().await.unwrap_or_default();
        if status.is_client_error() {
            Err(CarrierError::Refused {
                status: status.as_u16(),
                body,
            })
        } else {
            Err(CarrierError::Unavailable(format!("{status}: {body}")))
        }
    }
}

/// The error and its causes, on one line: reqwest's own message leaves out why the request
/// failed ("connection refused", a timeout).
fn with_causes(err: &dyn std::error::Error) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        line.push_str(": ");
        line.push_str(&inner.to_string());
        cause = inner.source();
    }
    line
}
