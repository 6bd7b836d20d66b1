//! The service's jobs. Both read and update the order's row through [`Orders`], the state
//! the service gives its workers; [`ShipOrder`] also calls the carrier, retried with backoff.

use redjob::{job, FailedContext, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};

use crate::carrier::{Carrier, CarrierError};
use crate::orders::{Order, Orders, Status};

/// The queues the service's jobs run on: a worker for the service takes both.
pub const QUEUES: [&str; 2] = ["orders", "shipping"];

/// Confirms a placed order, and queues its shipment in the same transaction.
#[derive(Debug, Serialize, Deserialize)]
pub struct ConfirmOrder {
    /// The order.
    pub order_id: i64,
}

#[job(queue = "orders", tries = 3, backoff = [1, 5], state = Orders)]
impl Job for ConfirmOrder {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let orders = ctx.state::<Orders>();
        let Some(order) = find(orders, self.order_id, ctx).await? else {
            return Ok(());
        };
        orders.confirm(order.id).await?;
        Ok(())
    }
}

/// Books a confirmed order's shipment with the carrier and records its tracking number. The
/// carrier's API fails now and then: an attempt that finds it unavailable is retried after 1,
/// 2, then 4 seconds, five attempts in all. A shipment the carrier refuses fails at once.
#[derive(Debug, Serialize, Deserialize)]
pub struct ShipOrder {
    /// The order.
    pub order_id: i64,
}

#[job(queue = "shipping", tries = 5, backoff = [1, 2, 4], state = Orders, state = Carrier)]
impl Job for ShipOrder {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        let orders = ctx.state::<Orders>();
        let Some(order) = find(orders, self.order_id, ctx).await? else {
            return Ok(());
        };
        // A run after a crash between booking and acknowledging finds it done.
        if order.status == Status::Shipped {
            return Ok(());
        }
        match ctx.state::<Carrier>().ship(&order).await {
            Ok(tracking) => orders.ship(order.id, &tracking).await?,
            Err(refused @ CarrierError::Refused { .. }) => ctx.fail(refused.to_string()),
            Err(unavailable) => return Err(unavailable.into()),
        }
        Ok(())
    }

    /// Runs once the shipment failed for good: the order says so.
    async fn failed(&self, ctx: &FailedContext) {
        let orders = ctx.state::<Orders>();
        if let Err(err) = orders.shipping_failed(self.order_id, ctx.reason()).await {
            tracing::warn!(order = self.order_id, error = %err, "cannot mark the order as failed to ship");
        }
    }
}

/// The order `id`; when there is none, the job fails for good (trying again finds none
/// either) and this returns `None`.
async fn find(orders: &Orders, id: i64, ctx: &JobContext) -> Result<Option<Order>, sqlx::Error> {
    let order = orders.get(id).await?;
    if order.is_none() {
        ctx.fail(format!("order {id} does not exist"));
    }
    Ok(order)
}
