//! The orders table: read and written by the HTTP handlers and by the jobs, through one
//! [`Orders`] handle that the service shares with its workers as state.

use redjob::RedisQueue;
use serde::Serialize;
use sqlx::PgPool;

use crate::jobs::{ConfirmOrder, ShipOrder};

/// The migrations of the service's tables (`migrations/`), embedded in the program.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// Where an order is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Taken by `POST /orders`; its jobs are queued.
    Placed,
    /// Checked by [`ConfirmOrder`].
    Confirmed,
    /// Handed to the carrier by [`ShipOrder`].
    Shipped,
    /// The carrier refused it, or kept failing until the job gave up.
    ShippingFailed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Placed => "placed",
            Status::Confirmed => "confirmed",
            Status::Shipped => "shipped",
            Status::ShippingFailed => "shipping_failed",
        }
    }

    fn parse(text: &str) -> Result<Status, sqlx::Error> {
        Ok(match text {
            "placed" => Status::Placed,
            "confirmed" => Status::Confirmed,
            "shipped" => Status::Shipped,
            "shipping_failed" => Status::ShippingFailed,
            other => {
                return Err(sqlx::Error::Decode(
                    format!("unknown order status {other:?}").into(),
                ))
            }
        })
    }
}

/// One order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Order {
    /// Its id.
    pub id: i64,
    /// What was ordered.
    pub item: String,
    /// How many.
    pub quantity: i32,
    /// Where it is.
    pub status: Status,
    /// The carrier's tracking number, once shipped.
    pub tracking: Option<String>,
    /// Why shipping failed, if it did.
    pub problem: Option<String>,
}

/// Why an order could not be placed.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The order's job could not be queued.
    #[error("queue: {0}")]
    Queue(#[from] redjob::Error),
    /// The order's job could not be written into the outbox.
    #[error("outbox: {0}")]
    Outbox(#[from] redjob::outbox::OutboxError),
}

/// A change to one order.
#[derive(Debug, Clone)]
enum Change {
    Shipped { tracking: String },
    ShippingFailed { problem: String },
}

/// The service's orders, in PostgreSQL: a handle shared by the HTTP handlers and, as worker
/// state, by the jobs (`ctx.state::<Orders>()`). Cloning it shares the pool behind it.
#[derive(Clone)]
pub struct Orders(PgPool);

type Row = (i64, String, i32, String, Option<String>, Option<String>);

fn order((id, item, quantity, status, tracking, problem): Row) -> Result<Order, sqlx::Error> {
    Ok(Order {
        id,
        item,
        quantity,
        status: Status::parse(&status)?,
        tracking,
        problem,
    })
}

impl Orders {
    /// Orders in PostgreSQL, through `pool`.
    pub fn postgres(pool: PgPool) -> Orders {
        Orders(pool)
    }

    /// Takes a new order, `placed`, and queues its [`ConfirmOrder`] through `jobs`: both
    /// or neither. The job is written into the outbox in the order's own transaction, so it
    /// exists once the order does and runs only after the order is visible.
    pub async fn place(
        &self,
        item: &str,
        quantity: i32,
        jobs: &RedisQueue,
    ) -> Result<Order, PlaceError> {
        let mut tx = self.0.begin().await?;
        let row: Row = sqlx::query_as(
            "INSERT INTO orders (item, quantity) VALUES ($1, $2) \
             RETURNING id, item, quantity, status, tracking, problem",
        )
        .bind(item)
        .bind(quantity)
        .fetch_one(&mut *tx)
        .await?;
        let order = order(row)?;
        ConfirmOrder { order_id: order.id }
            .dispatch()
            .via(jobs)
            .in_transaction(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(order)
    }

    /// Marks a placed order confirmed and queues its [`ShipOrder`], in one transaction; an
    /// order that is not `placed` is left as it is. Called by a job, it dispatches through
    /// the worker's handle.
    pub async fn confirm(&self, id: i64) -> Result<(), PlaceError> {
        let mut tx = self.0.begin().await?;
        let confirmed = sqlx::query(
            "UPDATE orders SET status = 'confirmed', updated_at = now() \
             WHERE id = $1 AND status = 'placed'",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if confirmed.rows_affected() == 1 {
            ShipOrder { order_id: id }
                .dispatch()
                .in_transaction(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The order `id`, if there is one.
    pub async fn get(&self, id: i64) -> Result<Option<Order>, sqlx::Error> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, item, quantity, status, tracking, problem FROM orders WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0)
        .await?;
        row.map(order).transpose()
    }

    /// Marks the order shipped, with its tracking number.
    pub async fn ship(&self, id: i64, tracking: &str) -> Result<(), sqlx::Error> {
        let tracking = tracking.to_owned();
        self.update(id, Change::Shipped { tracking }).await
    }

    /// Marks the order as failed to ship, saying why.
    pub async fn shipping_failed(&self, id: i64, problem: &str) -> Result<(), sqlx::Error> {
        let problem = problem.to_owned();
        self.update(id, Change::ShippingFailed { problem }).await
    }

    async fn update(&self, id: i64, change: Change) -> Result<(), sqlx::Error> {
        let (status, tracking, problem) = match change {
            Change::Shipped { tracking } => (Status::Shipped, Some(tracking), None),
            Change::ShippingFailed { problem } => (Status::ShippingFailed, None, Some(problem)),
        };
        sqlx::query(
            "UPDATE orders SET status = $2, tracking = COALESCE($3, tracking), \
             problem = $4, updated_at = now() WHERE id = $1",
        )
        .bind(id)
        .bind(status.as_str())
        .bind(tracking)
        .bind(problem)
        .execute(&self.0)
        .await?;
        Ok(())
    }
}
