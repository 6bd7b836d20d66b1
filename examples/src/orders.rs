//! An order service's jobs, and the code that dispatches them: what `examples/tests/orders.rs`
//! tests with plain `cargo test`, without Redis.
//!
//! Placing an order charges the card, then mails a receipt a minute later; if the charge fails
//! for good, the team is told. The card gateway is a stub that answers by card number, as a
//! payment provider's test mode does.

use redjob::{job, Chain, FailedContext, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};

/// The card the stub gateway accepts.
pub const CARD_OK: &str = "4242424242424242";
/// A card the stub gateway declines: the charge fails for good, without a retry.
pub const CARD_DECLINED: &str = "4000000000000002";
/// A card for which the stub gateway answers 429, too many requests: try again in a minute.
pub const CARD_BUSY: &str = "4000000000000429";

/// What the stub gateway answers.
enum Gateway {
    Charged,
    Declined,
    TooManyRequests { retry_after: u64 },
    Unavailable,
}

fn gateway(card: &str) -> Gateway {
    match card {
        CARD_OK => Gateway::Charged,
        CARD_DECLINED => Gateway::Declined,
        CARD_BUSY => Gateway::TooManyRequests { retry_after: 60 },
        _ => Gateway::Unavailable,
    }
}

/// Charges an order's card.
#[derive(Debug, Serialize, Deserialize)]
pub struct ChargeCard {
    /// The order.
    pub order: u64,
    /// How much, in cents.
    pub cents: u64,
    /// The card number.
    pub card: String,
}

#[job(queue = "payments", tries = 3, backoff = [10, 60])]
impl Job for ChargeCard {
    async fn handle(&self, ctx: &JobContext) -> JobResult {
        match gateway(&self.card) {
            Gateway::Charged => Ok(()),
            Gateway::Declined => {
                ctx.fail(format!("card declined for order {}", self.order));
                Ok(())
            }
            Gateway::TooManyRequests { retry_after } => {
                ctx.release(retry_after);
                Ok(())
            }
            Gateway::Unavailable => Err("the card gateway is unavailable".into()),
        }
    }

    async fn failed(&self, ctx: &FailedContext) {
        tracing::warn!(order = self.order, reason = ctx.reason(), "charge failed");
    }
}

/// Mails an order's receipt.
#[derive(Debug, Serialize, Deserialize)]
pub struct MailReceipt {
    /// The order.
    pub order: u64,
}

#[job(queue = "mail")]
impl Job for MailReceipt {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

/// Tells the team an order could not be charged.
#[derive(Debug, Serialize, Deserialize)]
pub struct NotifyTeam {
    /// The order.
    pub order: u64,
}

#[job]
impl Job for NotifyTeam {
    async fn handle(&self, _ctx: &JobContext) -> JobResult {
        Ok(())
    }
}

/// Places an order: charges the card, then mails the receipt a minute later; tells the team
/// when the charge fails for good.
pub async fn place_order(order: u64, cents: u64, card: &str) -> Result<(), redjob::Error> {
    if cents == 0 {
        return Ok(());
    }
    let charge = ChargeCard {
        order,
        cents,
        card: card.to_owned(),
    };
    Chain::new(charge.dispatch())
        .then(MailReceipt { order }.dispatch().delay(60))
        .catch(NotifyTeam { order }.dispatch())
        .dispatch()
        .await?;
    Ok(())
}
