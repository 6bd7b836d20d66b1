//! The orders table: read and written by the HTTP handlers and by the jobs, through one
//! [`Orders`] handle that the service shares with its workers as state.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;
use sqlx::PgPool;

/// The migrations of the service's tables (`migrations/`), embedded in the program.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// Where an order is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Taken by `POST /orders`; its jobs are queued.
    Placed,
    /// Checked by [`ConfirmOrder`](crate::jobs::ConfirmOrder).
    Confirmed,
    /// Handed to the carrier by [`ShipOrder`](crate::jobs::ShipOrder).
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

/// The operations the service needs on its orders. [`Orders::postgres`] keeps them in
/// PostgreSQL; [`Orders::in_memory`] in the process, for tests without a database.
#[async_trait]
trait OrderStore: Send + Sync {
    async fn insert(&self, item: &str, quantity: i32) -> Result<Order, sqlx::Error>;
    async fn get(&self, id: i64) -> Result<Option<Order>, sqlx::Error>;
    async fn update(&self, id: i64, change: Change) -> Result<(), sqlx::Error>;
}

/// A change to one order.
#[derive(Debug, Clone)]
enum Change {
    Confirmed,
    Shipped { tracking: String },
    ShippingFailed { problem: String },
}

/// The service's orders: a handle shared by the HTTP handlers and, as worker state, by the
/// jobs (`ctx.state::<Orders>()`). Cloning it shares the pool behind it.
#[derive(Clone)]
pub struct Orders(Arc<dyn OrderStore>);

impl Orders {
    /// Orders in PostgreSQL, through `pool`.
    pub fn postgres(pool: PgPool) -> Orders {
        Orders(Arc::new(Postgres(pool)))
    }

    /// Orders kept in this process: for tests that run without PostgreSQL.
    pub fn in_memory() -> Orders {
        Orders(Arc::new(Memory::default()))
    }

    /// Takes a new order, `placed`.
    pub async fn insert(&self, item: &str, quantity: i32) -> Result<Order, sqlx::Error> {
        self.0.insert(item, quantity).await
    }

    /// The order `id`, if there is one.
    pub async fn get(&self, id: i64) -> Result<Option<Order>, sqlx::Error> {
        self.0.get(id).await
    }

    /// Marks the order confirmed.
    pub async fn confirm(&self, id: i64) -> Result<(), sqlx::Error> {
        self.0.update(id, Change::Confirmed).await
    }

    /// Marks the order shipped, with its tracking number.
    pub async fn ship(&self, id: i64, tracking: &str) -> Result<(), sqlx::Error> {
        let tracking = tracking.to_owned();
        self.0.update(id, Change::Shipped { tracking }).await
    }

    /// Marks the order as failed to ship, saying why.
    pub async fn shipping_failed(&self, id: i64, problem: &str) -> Result<(), sqlx::Error> {
        let problem = problem.to_owned();
        self.0.update(id, Change::ShippingFailed { problem }).await
    }
}

struct Postgres(PgPool);

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

#[async_trait]
impl OrderStore for Postgres {
    async fn insert(&self, item: &str, quantity: i32) -> Result<Order, sqlx::Error> {
        let row: Row = sqlx::query_as(
            "INSERT INTO orders (item, quantity) VALUES ($1, $2) \
             RETURNING id, item, quantity, status, tracking, problem",
        )
        .bind(item)
        .bind(quantity)
        .fetch_one(&self.0)
        .await?;
        order(row)
    }

    async fn get(&self, id: i64) -> Result<Option<Order>, sqlx::Error> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, item, quantity, status, tracking, problem FROM orders WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.0)
        .await?;
        row.map(order).transpose()
    }

    async fn update(&self, id: i64, change: Change) -> Result<(), sqlx::Error> {
        let (status, tracking, problem) = match change {
            Change::Confirmed => (Status::Confirmed, None, None),
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

#[derive(Default)]
struct Memory(Mutex<BTreeMap<i64, Order>>);

#[async_trait]
impl OrderStore for Memory {
    async fn insert(&self, item: &str, quantity: i32) -> Result<Order, sqlx::Error> {
        let mut orders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let id = orders.keys().next_back().map_or(1, |last| last + 1);
        let order = Order {
            id,
            item: item.to_owned(),
            quantity,
            status: Status::Placed,
            tracking: None,
            problem: None,
        };
        orders.insert(id, order.clone());
        Ok(order)
    }

    async fn get(&self, id: i64) -> Result<Option<Order>, sqlx::Error> {
        let orders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Ok(orders.get(&id).cloned())
    }

    async fn update(&self, id: i64, change: Change) -> Result<(), sqlx::Error> {
        let mut orders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(order) = orders.get_mut(&id) {
            match change {
                Change::Confirmed => order.status = Status::Confirmed,
                Change::Shipped { tracking } => {
                    order.status = Status::Shipped;
                    order.tracking = Some(tracking);
                    order.problem = None;
                }
                Change::ShippingFailed { problem } => {
                    order.status = Status::ShippingFailed;
                    order.problem = Some(problem);
                }
            }
        }
        Ok(())
    }
}
