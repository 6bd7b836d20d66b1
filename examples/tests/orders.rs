//! Testing an app's jobs and the code that dispatches them, with plain `cargo test` and no
//! Redis: a fake queue records what `place_order` dispatches, synchronous runs show what each
//! job does, and an inline fake runs the whole flow.

use examples::orders::{
    place_order, ChargeCard, MailReceipt, NotifyTeam, CARD_BUSY, CARD_DECLINED, CARD_OK,
};
use redjob::{testing, Job};
use redjob_worker::testing::{inline, run, Outcome};
use std::time::Duration;

#[tokio::test]
async fn placing_an_order_charges_the_card_then_mails_the_receipt() {
    let fake = testing::fake();
    place_order(7, 1999, CARD_OK).await.unwrap();

    fake.assert_pushed_with::<ChargeCard>(|charge| charge.order == 7 && charge.cents == 1999);
    fake.assert_pushed_on::<ChargeCard>("payments");
    // The receipt waits for the charge: chained, not pushed yet.
    fake.assert_chained(&[ChargeCard::NAME, MailReceipt::NAME]);
    fake.assert_not_pushed::<MailReceipt>();
    let chain = &fake.chains()[0];
    let receipt = chain.jobs().nth(1).unwrap();
    assert_eq!(receipt.delay, Some(Duration::from_secs(60).into()));
    assert_eq!(receipt.queue, "mail");
    assert!(chain.catch.as_ref().is_some_and(|c| c.is::<NotifyTeam>()));
}

#[tokio::test]
async fn a_free_order_dispatches_nothing() {
    let fake = testing::fake();
    place_order(8, 0, CARD_OK).await.unwrap();
    fake.assert_nothing_pushed();
}

#[tokio::test]
async fn the_charge_releases_itself_when_the_gateway_answers_429() {
    let charge = |card: &str| ChargeCard {
        order: 7,
        cents: 1999,
        card: card.to_owned(),
    };
    let busy = run(charge(CARD_BUSY)).await;
    assert_eq!(busy.outcome, Outcome::Released(Duration::from_secs(60)));

    let declined = run(charge(CARD_DECLINED)).await;
    assert_eq!(
        declined.outcome,
        Outcome::Failed("card declined for order 7".into())
    );
    assert!(declined.failed_hook_ran);

    // An unreachable gateway is retried with the job's backoff, then fails.
    let runs = run(charge("0000")).to_end().await;
    let outcomes: Vec<_> = runs.attempts.iter().map(|a| a.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Retried(Duration::from_secs(10)),
            Outcome::Retried(Duration::from_secs(60)),
            Outcome::Failed("the card gateway is unavailable".into()),
        ]
    );
}

#[tokio::test]
async fn the_whole_flow_runs_inline() {
    let flow = inline();
    place_order(7, 1999, CARD_OK).await.unwrap();
    flow.assert_ran::<ChargeCard>();
    flow.assert_ran::<MailReceipt>();
    flow.assert_nothing_failed();

    let declined = inline();
    place_order(9, 500, CARD_DECLINED).await.unwrap();
    declined.assert_ran::<NotifyTeam>();
    let ran: Vec<_> = declined.ran().iter().map(|r| r.job.job.clone()).collect();
    assert_eq!(ran, [ChargeCard::NAME, NotifyTeam::NAME]);
}
