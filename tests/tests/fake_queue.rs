//! The fake queue of `redjob::testing`: what it records, what its assertions say, and that
//! one test's fake never sees another's dispatches. No Redis is involved.

use chrono::{DateTime, TimeZone, Utc};
use redjob::schedule::{self, Fired, Schedule};
use redjob::testing::{self, ChainLink, Fake, Origin};
use redjob::{job, Batch, Bulk, Chain, Delay, Error, Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Barrier};
use std::time::Duration;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Invoice {
    id: u64,
}

#[job(queue = "billing", tries = 4)]
impl Job for Invoice {
    async fn handle(&self, _: &JobContext) -> JobResult {
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct AuditNote {
    note: String,
}

#[job]
impl Job for AuditNote {
    async fn handle(&self, _: &JobContext) -> JobResult {
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct AccountRefresh {
    account: u64,
}

#[job(unique_for = 60)]
impl Job for AccountRefresh {
    async fn handle(&self, _: &JobContext) -> JobResult {
        Ok(())
    }

    fn unique_id(&self) -> String {
        self.account.to_string()
    }
}

#[derive(Serialize, Deserialize)]
struct ShopReindex {
    shop: u64,
    version: u64,
}

#[job(debounce = 30)]
impl Job for ShopReindex {
    async fn handle(&self, _: &JobContext) -> JobResult {
        Ok(())
    }

    fn debounce_id(&self) -> String {
        self.shop.to_string()
    }
}

/// The message of the panic `check` raises, or `None` when it passes.
fn failure(check: impl FnOnce()) -> Option<String> {
    let panic = catch_unwind(AssertUnwindSafe(check)).err()?;
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_dispatch_is_recorded_with_its_queue_delay_and_options_and_nothing_is_pushed() {
    let fake = testing::fake();
    let uuid = Invoice { id: 7 }.dispatch().delay(30).await.unwrap();
    AuditNote { note: "x".into() }
        .dispatch()
        .on_queue("audit")
        .tag("order:7")
        .await
        .unwrap();

    let pushed = fake.pushed();
    assert_eq!(pushed.len(), 2);
    assert_eq!(pushed[0].uuid, uuid);
    assert_eq!(pushed[0].job, "Invoice");
    assert_eq!(pushed[0].queue, "billing");
    assert_eq!(pushed[0].delay, Some(Delay::After(Duration::from_secs(30))));
    assert_eq!(pushed[0].payload.max_tries, Some(4));
    assert_eq!(pushed[0].origin, Origin::Dispatch);
    assert_eq!(pushed[1].payload.tags, ["order:7"]);
    assert_eq!(
        fake.pushed_of::<Invoice>()
            .into_iter()
            .map(|(job, _)| job)
            .collect::<Vec<_>>(),
        [Invoice { id: 7 }]
    );

    fake.assert_pushed::<Invoice>();
    fake.assert_pushed_with::<Invoice>(|invoice| invoice.id == 7);
    fake.assert_pushed_on::<Invoice>("billing");
    fake.assert_pushed_on::<AuditNote>("audit");
    fake.assert_pushed_with_delay::<Invoice>(30);
    fake.assert_pushed_times::<Invoice>(1);
    fake.assert_pushed_matching::<AuditNote>(|audit, record| {
        audit.note == "x" && record.payload.tags == ["order:7"]
    });
    fake.assert_not_pushed::<AccountRefresh>();
    // Every other operation of the fake's handle says it is a fake.
    let error = fake.handle().size("billing").await.unwrap_err().to_string();
    assert!(error.contains("fake queue"), "{error}");
}

#[tokio::test]
async fn each_assertion_fails_when_it_does_not_hold_listing_what_was_pushed() {
    let fake = testing::fake();
    let nothing = failure(|| fake.assert_pushed::<Invoice>()).unwrap();
    assert!(
        nothing.contains("expected Invoice pushed; nothing was pushed"),
        "{nothing}"
    );
    fake.assert_nothing_pushed();

    Invoice { id: 7 }.dispatch().delay(30).await.unwrap();
    Invoice { id: 8 }.dispatch().await.unwrap();
    let listing = "2 job(s) pushed:\n  1. Invoice on \"billing\", delayed 30s: {\"id\":7}\n  2. Invoice on \"billing\": {\"id\":8}";
    let cases: Vec<(Option<String>, &str)> = vec![
        (
            failure(|| fake.assert_pushed_with::<Invoice>(|i| i.id == 9)),
            "expected Invoice pushed matching the check",
        ),
        (
            failure(|| fake.assert_pushed_on::<Invoice>("default")),
            "expected Invoice pushed on queue \"default\"",
        ),
        (
            failure(|| fake.assert_pushed_with_delay::<Invoice>(60)),
            "expected Invoice pushed with delay After(60s)",
        ),
        (
            failure(|| fake.assert_pushed_times::<Invoice>(3)),
            "expected Invoice pushed 3 time(s), found 2",
        ),
        (
            failure(|| fake.assert_not_pushed::<Invoice>()),
            "expected Invoice pushed 0 time(s), found 2",
        ),
        (
            failure(|| fake.assert_nothing_pushed()),
            "expected nothing pushed",
        ),
        (
            failure(|| fake.assert_pushed::<AuditNote>()),
            "expected AuditNote pushed",
        ),
    ];
    for (message, expected) in cases {
        let message = message.unwrap_or_else(|| panic!("{expected:?} did not fail"));
        assert!(message.starts_with(expected), "{message}");
        assert!(message.ends_with(listing), "{message}");
    }
    let chained = failure(|| fake.assert_chained(&["Invoice"])).unwrap();
    assert_eq!(
        chained,
        "expected a chain of [\"Invoice\"]; no chain was dispatched"
    );
    let batched = failure(|| fake.assert_batched(|_| true)).unwrap();
    assert_eq!(
        batched,
        "expected a batch matching the check; no batch was dispatched"
    );
}

#[test]
fn fakes_of_tests_running_at_once_stay_apart() {
    // Two tests on two threads, dispatching at the same time, each through its own fake.
    let together = Arc::new(Barrier::new(2));
    let test = |first_id: u64| {
        let together = together.clone();
        std::thread::spawn(move || {
            runtime().block_on(async {
                let fake = testing::fake();
                together.wait();
                for id in first_id..first_id + 100 {
                    Invoice { id }.dispatch().await.unwrap();
                    // Spawned tasks of a current-thread runtime run on the test's thread.
                    let note = id.to_string();
                    tokio::spawn(task(AuditNote { note }.dispatch()))
                        .await
                        .unwrap();
                    tokio::task::yield_now().await;
                }
                together.wait();
                let ids: Vec<u64> = fake
                    .pushed_of::<Invoice>()
                    .into_iter()
                    .map(|(job, _)| job.id)
                    .collect();
                (ids, fake.pushed_of::<AuditNote>().len())
            })
        })
    };
    let (one, two) = (test(0), test(1000));
    let (one, one_audits) = one.join().unwrap();
    let (two, two_audits) = two.join().unwrap();
    assert_eq!(one, (0..100).collect::<Vec<_>>());
    assert_eq!(two, (1000..1100).collect::<Vec<_>>());
    assert_eq!((one_audits, two_audits), (100, 100));
}

/// A dispatch as a task to spawn.
async fn task<J: Job>(dispatch: redjob::PendingDispatch<J>) {
    dispatch.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_fake_records_tasks_on_other_threads_and_a_fake_uninstalls_when_dropped() {
    let fake = Fake::new();
    let tasks: Vec<_> = (0..20)
        .map(|id| tokio::spawn(fake.scope(task(Invoice { id }.dispatch()))))
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    fake.assert_pushed_times::<Invoice>(20);

    // Installed fakes nest: the inner one records until dropped, then the outer one again.
    let outer = testing::fake();
    {
        let inner = testing::fake();
        AuditNote {
            note: "inner".into(),
        }
        .dispatch()
        .await
        .unwrap();
        inner.assert_pushed_times::<AuditNote>(1);
    }
    AuditNote {
        note: "outer".into(),
    }
    .dispatch()
    .await
    .unwrap();
    outer.assert_pushed_with::<AuditNote>(|audit| audit.note == "outer");
    outer.assert_pushed_times::<AuditNote>(1);
    // A handle given to the code under test records without being installed.
    let apart = Fake::new();
    Invoice { id: 1 }
        .dispatch()
        .via(&apart.handle())
        .await
        .unwrap();
    apart.assert_pushed_times::<Invoice>(1);
    outer.assert_not_pushed::<Invoice>();
}

#[tokio::test]
async fn bulk_unique_and_debounced_dispatches_are_recorded_as_redis_would_keep_them() {
    let fake = testing::fake();
    let mut bulk = Bulk::new();
    bulk.add(Invoice { id: 1 }.dispatch()).unwrap();
    bulk.add(AccountRefresh { account: 5 }.dispatch()).unwrap();
    bulk.add(AccountRefresh { account: 5 }.dispatch()).unwrap();
    let sent = bulk.send().await.unwrap();
    assert!(!sent[1].is_duplicate());
    assert!(sent[2].is_duplicate(), "the lock of the first is held");
    match (AccountRefresh { account: 5 }).dispatch().await {
        Err(Error::Duplicate(duplicate)) => assert_eq!(duplicate.holder, sent[1].uuid()),
        other => panic!("expected a duplicate, got {other:?}"),
    }
    AccountRefresh { account: 6 }.dispatch().await.unwrap();
    fake.assert_pushed_times::<AccountRefresh>(2);

    for version in 1..=3 {
        ShopReindex { shop: 1, version }.dispatch().await.unwrap();
    }
    ShopReindex {
        shop: 2,
        version: 1,
    }
    .dispatch()
    .await
    .unwrap();
    // One job per debounce id waits, with the latest data.
    fake.assert_pushed_times::<ShopReindex>(2);
    fake.assert_pushed_with::<ShopReindex>(|r| r.shop == 1 && r.version == 3);
    fake.assert_pushed_with_delay::<ShopReindex>(30);

    fake.clear();
    fake.assert_nothing_pushed();
    AccountRefresh { account: 5 }.dispatch().await.unwrap();
    fake.assert_pushed_times::<AccountRefresh>(1);
}

#[tokio::test]
async fn chains_and_batches_are_recorded_whole_and_only_what_starts_now_is_pushed() {
    let fake = testing::fake();
    let chain_id = Chain::new(Invoice { id: 1 }.dispatch())
        .then(
            AuditNote {
                note: "sent".into(),
            }
            .dispatch(),
        )
        .then_batch(
            Batch::new()
                .name("mail")
                .jobs((10..13).map(|id| Invoice { id }.dispatch())),
        )
        .then(
            AuditNote {
                note: "mailed".into(),
            }
            .dispatch()
            .delay(5),
        )
        .catch(
            AuditNote {
                note: "failed".into(),
            }
            .dispatch(),
        )
        .on_queue("flows")
        .dispatch()
        .await
        .unwrap();
    fake.assert_chained(&["Invoice", "AuditNote", "batch", "AuditNote"]);
    let chain = &fake.chains()[0];
    assert_eq!(chain.id, chain_id);
    assert_eq!(
        chain
            .catch
            .as_ref()
            .unwrap()
            .decode::<AuditNote>()
            .unwrap()
            .note,
        "failed"
    );
    let ChainLink::Batch(parked) = &chain.links[2] else {
        panic!("the third link is the batch");
    };
    assert_eq!(parked.in_chain, Some(chain_id));
    assert_eq!(parked.count::<Invoice>(), 3);
    let last: Vec<_> = chain.jobs().map(|job| job.queue.as_str()).collect();
    assert_eq!(
        last,
        ["billing", "flows", "flows"],
        "links naming no queue take the chain's"
    );
    // Only the first link is pushed; the rest waits for it.
    fake.assert_pushed_times::<Invoice>(1);
    fake.assert_pushed_matching::<Invoice>(|_, record| {
        record.origin == Origin::Chain { id: chain_id } && record.payload.chain == Some(chain_id)
    });
    fake.assert_not_pushed::<AuditNote>();

    let batch_id = Batch::new()
        .name("import")
        .jobs((0..3).map(|id| Invoice { id }.dispatch()))
        .chain(
            Chain::new(AuditNote { note: "a".into() }.dispatch())
                .then(AuditNote { note: "b".into() }.dispatch()),
        )
        .then(
            AuditNote {
                note: "then".into(),
            }
            .dispatch(),
        )
        .finally(
            AuditNote {
                note: "finally".into(),
            }
            .dispatch(),
        )
        .allow_failures()
        .dispatch()
        .await
        .unwrap();
    fake.assert_batched(|batch| {
        batch.id == batch_id
            && batch.name == "import"
            && batch.allow_failures
            && batch.names() == ["Invoice", "Invoice", "Invoice", "AuditNote"]
            && batch
                .then
                .as_ref()
                .is_some_and(|then| then.decode::<AuditNote>().unwrap().note == "then")
            && batch.catch.is_none()
    });
    let failed = failure(|| fake.assert_batched(|batch| batch.name == "export")).unwrap();
    assert!(failed.contains("batch \"import\""), "{failed}");
    let batch = fake
        .batches()
        .into_iter()
        .find(|b| b.id == batch_id)
        .unwrap();
    let chain = batch.chain_of(&batch.jobs[3]).expect("the batch's chain");
    assert_eq!(chain.names(), ["AuditNote", "AuditNote"]);
    // Every job of the batch is pushed at once (a chain's first link only).
    fake.assert_pushed_times::<Invoice>(4);
    fake.assert_pushed_times::<AuditNote>(1);

    let added = fake
        .handle()
        .add_to_batch(batch_id, [Invoice { id: 9 }.dispatch()])
        .await
        .unwrap();
    assert!(added);
    fake.assert_pushed_matching::<Invoice>(|job, record| {
        job.id == 9 && record.origin == Origin::Batch { id: batch_id }
    });
    let handle = fake.handle();
    let unknown = handle.add_to_batch(uuid::Uuid::new_v4(), [Invoice { id: 1 }.dispatch()]);
    assert!(!unknown.await.unwrap(), "no such batch");
}

#[tokio::test]
async fn schedules_fire_each_tick_once_as_the_workers_would() {
    schedule::define(Schedule::new("fake-invoices", Invoice { id: 0 }.dispatch()).every_minute());
    schedule::define(
        Schedule::new(
            "fake-audit",
            AuditNote {
                note: "nightly".into(),
            }
            .dispatch(),
        )
        .daily_at("03:00")
        .unwrap()
        .zone("Europe/Paris")
        .unwrap()
        .without_overlapping(),
    );
    let fake = testing::fake();
    let start: DateTime<Utc> = Utc.with_ymd_and_hms(2026, 7, 1, 0, 59, 30).unwrap();
    let fired = fake
        .fire_schedules_between(start, start + chrono::Duration::minutes(3))
        .await
        .unwrap();
    let ours: Vec<_> = fired
        .iter()
        .filter(|(name, ..)| name.starts_with("fake-"))
        .collect();
    // 01:00 UTC is 03:00 in Paris in July: the nightly audit fires with the minute.
    let names: Vec<_> = ours
        .iter()
        .map(|(name, tick, _)| (name.as_str(), tick.format("%H:%M").to_string()))
        .collect();
    assert_eq!(
        names,
        [
            ("fake-audit", "01:00".to_owned()),
            ("fake-invoices", "01:00".to_owned()),
            ("fake-invoices", "01:01".to_owned()),
            ("fake-invoices", "01:02".to_owned()),
        ]
    );
    assert!(ours
        .iter()
        .all(|(_, _, fired)| matches!(fired, Fired::Pushed(_))));
    fake.assert_pushed_matching::<AuditNote>(
        |_, record| matches!(&record.origin, Origin::Schedule { name, .. } if name == "fake-audit"),
    );
    // A tick fired once is taken; the next night's audit is skipped while the first one's
    // job, which nothing ran, holds its overlap lock.
    let again = fake
        .fire_schedule("fake-invoices", ours[1].1)
        .await
        .unwrap();
    assert_eq!(again, Fired::Taken);
    let next_night = Utc.with_ymd_and_hms(2026, 7, 2, 1, 0, 0).unwrap();
    let skipped = fake.fire_schedule("fake-audit", next_night).await.unwrap();
    assert_eq!(skipped, Fired::Skipped);
    fake.assert_pushed_times::<AuditNote>(1);
    let unknown = fake.fire_schedule("no-such-schedule", next_night).await;
    assert!(matches!(unknown, Err(Error::UnknownSchedule(_))));
}
