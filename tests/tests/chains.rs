//! Chains against a real redis-server and worker processes: links run in order, each pushed in
//! the step that acknowledges the one before it; a failed link stops the chain and pushes the
//! catch job once; a released link keeps its chain; links added from a handler run where they
//! were put; stored bytes grow linearly with the chain; signing covers every link.

use examples::{Caught, RebuildIndex, Step};
use redis::AsyncCommands;
use redjob::workflow::{Chain, Link};
use redjob::{Error, Payload};
use std::time::Duration;
use tests::steps::labels;
use tests::worker_process::WorkerProcess;
use tests::{wait_until, TestRedis};

const LONG: Duration = Duration::from_secs(30);

fn start_worker(redis_url: &str, args: &[&str]) -> WorkerProcess {
    WorkerProcess::start(env!("CARGO_BIN_EXE_test_worker"), redis_url, args)
}

/// The steps recorded so far, in the order they finished.
async fn steps(redis: &TestRedis) -> Vec<serde_json::Value> {
    tests::steps::recorded(&mut redis.conn().await).await
}

async fn wait_for_steps(redis: &TestRedis, count: usize) -> Vec<serde_json::Value> {
    wait_until(LONG, format!("{count} steps recorded"), || async {
        steps(redis).await.len() >= count
    })
    .await;
    steps(redis).await
}

#[tokio::test]
async fn links_run_in_order_each_pushed_when_the_one_before_is_done() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let id = Chain::new(Step::new("import").dispatch())
        .then(Step::new("index").dispatch().on_queue("search"))
        .then(Step::new("mail").dispatch().delay(1))
        .on_queue("imports")
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    // Only the first link is queued; the others wait in the chain's list, once each.
    let mut conn = redis.conn().await;
    let ready: Vec<String> = conn.lrange("queues:imports", 0, -1).await.unwrap();
    assert_eq!(ready.len(), 1);
    let first = Payload::from_json(&ready[0]).unwrap();
    assert_eq!(first.uuid, id, "the chain's id is its first job's uuid");
    assert_eq!(first.chain, Some(id));
    let list = format!("jobs:chain:{id}");
    let kept: Vec<String> = conn.lrange(&list, 0, -1).await.unwrap();
    let kept: Vec<Link> = kept.iter().map(|l| Link::decode(l).unwrap()).collect();
    assert_eq!(kept[0].queue, "search", "a link's own queue wins");
    assert_eq!(
        kept[1].queue, "imports",
        "a link naming none takes the chain's"
    );
    assert_eq!(kept[1].due, "1.000");
    for link in &kept {
        assert_eq!(Payload::from_json(&link.payload).unwrap().chain, Some(id));
    }
    assert_eq!(queue.size("search").await.unwrap().total(), 0);

    let _worker = start_worker(redis.url(), &["--queue", "imports,search"]);
    let steps = wait_for_steps(&redis, 3).await;
    assert_eq!(labels(&steps), ["import", "index", "mail"]);
    for step in &steps {
        assert_eq!(step["attempt"], 1);
        assert_eq!(step["chain"], id.to_string());
    }
    // Each link started after the one before it ended; the delayed one a second later.
    let at = |i: usize, field: &str| steps[i][field].as_u64().unwrap();
    assert!(at(1, "started_us") >= at(0, "ended_us"));
    let waited = at(2, "started_us") - at(1, "ended_us");
    assert!(
        (900_000..3_000_000).contains(&waited),
        "the delayed link waited {waited} us"
    );
    // The chain's keys are gone with its last link.
    wait_until(LONG, "the chain's keys are deleted", || async {
        let mut conn = redis.conn().await;
        let keys: Vec<String> = conn.keys("jobs:chain:*").await.unwrap();
        keys.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(self::steps(&redis).await.len(), 3, "no link ran twice");
}

#[tokio::test]
async fn a_failed_link_stops_the_chain_and_pushes_the_catch_job_once() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let failing = Step {
        label: "second".into(),
        fail: true,
        ..Step::default()
    };
    let id = Chain::new(Step::new("first").dispatch())
        .then(failing.dispatch())
        .then(Step::new("third").dispatch())
        .catch(
            Caught {
                label: "import".into(),
            }
            .dispatch()
            .on_queue("alerts"),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();

    let _worker = start_worker(redis.url(), &["--queue", "default,alerts"]);
    let steps = wait_for_steps(&redis, 3).await;
    assert_eq!(labels(&steps), ["first", "second", "caught:import"]);
    let failed = queue.failed_jobs(10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].uuid, steps[1]["uuid"].as_str().unwrap());

    // The catch job is gone from Redis; the links after the failed one are kept, for as long
    // as the failed link is, so that retrying it picks the chain up.
    let mut conn = redis.conn().await;
    let catch: Option<String> = conn.get(format!("jobs:chain:{id}:catch")).await.unwrap();
    assert_eq!(catch, None);
    let list = format!("jobs:chain:{id}");
    let rest: Vec<String> = conn.lrange(&list, 0, -1).await.unwrap();
    assert_eq!(rest.len(), 1);
    let ttl: i64 = conn.ttl(&list).await.unwrap();
    assert!(ttl > 0, "the rest of the chain expires: ttl {ttl}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        labels(&self::steps(&redis).await).len(),
        3,
        "third never ran, catch ran once"
    );
}

#[tokio::test]
async fn a_released_link_keeps_its_chain_and_the_next_runs_after_it_succeeds() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let releasing = Step {
        label: "first".into(),
        release_first: true,
        ..Step::default()
    };
    Chain::new(releasing.dispatch())
        .then(Step::new("second").dispatch())
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let _worker = start_worker(redis.url(), &["--concurrency", "4"]);
    let steps = wait_for_steps(&redis, 3).await;
    assert_eq!(labels(&steps), ["first", "first", "second"]);
    assert_eq!(steps[0]["attempt"], 1);
    assert_eq!(steps[1]["attempt"], 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        self::steps(&redis).await.len(),
        3,
        "the second link ran once"
    );
}

#[tokio::test]
async fn links_added_from_a_handler_run_where_they_were_put() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let adding = Step {
        label: "a".into(),
        prepend: vec!["p1".into(), "p2".into()],
        append: vec!["z".into()],
        ..Step::default()
    };
    let id = Chain::new(adding.dispatch())
        .then(Step::new("b").dispatch())
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // A job that is no link starts a chain of its own by appending.
    let starter = Step {
        label: "solo".into(),
        append: vec!["after-solo".into()],
        ..Step::default()
    };
    let solo = starter
        .dispatch()
        .on_queue("other")
        .via(&queue)
        .await
        .unwrap();

    let _worker = start_worker(redis.url(), &["--queue", "default,other"]);
    let steps = wait_for_steps(&redis, 7).await;
    let chained: Vec<String> = steps
        .iter()
        .filter(|s| s["chain"] == id.to_string())
        .map(|s| s["label"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        chained,
        ["a", "p2", "p1", "b", "z"],
        "Laravel's prepend order"
    );
    let after_solo = steps.iter().find(|s| s["label"] == "after-solo").unwrap();
    assert_eq!(after_solo["chain"], solo.to_string());
    assert_eq!(steps.len(), 7);
}

#[tokio::test]
async fn a_chain_stores_each_link_once_so_its_bytes_grow_linearly() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let mut sizes = Vec::new();
    for links in [10, 400] {
        let mut chain = Chain::new(Step::new("0").dispatch());
        for n in 1..links {
            chain = chain.then(Step::new(n.to_string()).dispatch());
        }
        let id = chain.via(&queue).dispatch().await.unwrap();
        let mut conn = redis.conn().await;
        let first: Vec<String> = conn.lrange("queues:default", -1, -1).await.unwrap();
        let stored: Vec<String> = conn
            .lrange(format!("jobs:chain:{id}"), 0, -1)
            .await
            .unwrap();
        let bytes: usize = first[0].len() + stored.iter().map(String::len).sum::<usize>();
        sizes.push((first[0].len(), bytes));
    }
    let (first_small, total_small) = sizes[0];
    let (first_large, total_large) = sizes[1];
    assert!(
        first_large.abs_diff(first_small) <= 4,
        "the first link does not carry the rest: {first_small} vs {first_large} bytes"
    );
    let per_link_small = total_small as f64 / 10.0;
    let per_link_large = total_large as f64 / 400.0;
    assert!(
        (per_link_large / per_link_small - 1.0).abs() < 0.05,
        "bytes per link: {per_link_small:.0} for 10 links, {per_link_large:.0} for 400"
    );
}

#[tokio::test]
async fn every_link_is_signed_and_a_forged_one_never_runs() {
    let redis = TestRedis::start();
    let secret = "chain signing secret";
    let mut config = redis.config();
    config.signing_key = Some(redjob::SigningKey::new(secret));
    let queue = redis.queue_with(config);
    let id = Chain::new(Step::new("first").dispatch())
        .then(Step::new("second").dispatch())
        .then(Step::new("third").dispatch())
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // Someone with write access to Redis rewrites the third link's data.
    let list = format!("jobs:chain:{id}");
    let mut conn = redis.conn().await;
    let third: String = conn.lindex(&list, 1).await.unwrap();
    let forged = third.replace(r#""label":"third""#, r#""label":"forged""#);
    assert_ne!(forged, third);
    let _: () = conn.lset(&list, 1, &forged).await.unwrap();

    let _worker = WorkerProcess::start_with_env(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &[],
        &[("JOBS_SIGNING_KEY", secret)],
    );
    let steps = wait_for_steps(&redis, 2).await;
    assert_eq!(labels(&steps), ["first", "second"]);
    wait_until(LONG, "the forged link is in the failed store", || async {
        queue.failed_jobs(10).await.unwrap().len() == 1
    })
    .await;
    let failed = &queue.failed_jobs(10).await.unwrap()[0];
    assert!(
        failed.exception.contains("signature mismatch"),
        "{}",
        failed.exception
    );
    assert_eq!(labels(&self::steps(&redis).await), ["first", "second"]);
}

#[tokio::test]
async fn a_unique_job_cannot_be_a_link() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    let refused = Chain::new(Step::new("first").dispatch())
        .then(RebuildIndex::default().dispatch())
        .via(&queue)
        .dispatch()
        .await;
    match refused {
        Err(Error::NotInWorkflow { job, kind }) => {
            assert_eq!((job, kind), ("rebuild-index", "unique"));
        }
        other => panic!("expected NotInWorkflow, got {other:?}"),
    }
    assert_eq!(
        queue.size("default").await.unwrap().total(),
        0,
        "nothing was pushed"
    );
}

#[tokio::test]
async fn a_batch_as_a_link_runs_all_its_jobs_before_the_chain_goes_on() {
    use redjob::workflow::Batch;
    let redis = TestRedis::start();
    let queue = redis.queue();
    let rows = (0..5).map(|n| Step::new(format!("row{n}")).dispatch());
    let batch = Batch::new().name("rows").jobs(rows).finally(
        Caught {
            label: "rows".into(),
        }
        .dispatch(),
    );
    let own_then = Batch::new()
        .job(Step::new("inner").dispatch())
        .then(Step::new("inner-then").dispatch());
    let id = Chain::new(Step::new("first").dispatch())
        .then_batch(batch)
        .then(Step::new("after").dispatch())
        .then_batch(own_then)
        .then(Step::new("last").dispatch())
        .catch(
            Caught {
                label: "chain".into(),
            }
            .dispatch(),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    // The batches exist with their jobs parked until the chain reaches them.
    let mut conn = redis.conn().await;
    let parked_keys: Vec<String> = conn.keys("jobs:batch:*:parked").await.unwrap();
    let mut parked = Vec::new();
    for key in &parked_keys {
        parked.push(conn.llen::<_, u64>(key).await.unwrap());
    }
    parked.sort();
    assert_eq!(parked, [1, 5]);
    assert_eq!(
        queue.size("default").await.unwrap().total(),
        1,
        "only the first link"
    );

    let _worker = start_worker(redis.url(), &["--concurrency", "4"]);
    wait_for_steps(&redis, 11).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let steps = steps(&redis).await;
    let labels = labels(&steps);
    let at = |label: &str| {
        labels
            .iter()
            .position(|l| l == label)
            .unwrap_or_else(|| panic!("{label} missing: {labels:?}"))
    };
    let rows: Vec<usize> = (0..5).map(|n| at(&format!("row{n}"))).collect();
    assert!(
        rows.iter().all(|&r| r > at("first") && r < at("after")),
        "{labels:?}"
    );
    assert!(at("caught:rows") > *rows.iter().max().unwrap());
    assert!(
        at("after") < at("inner")
            && at("inner") < at("inner-then")
            && at("inner-then") < at("last"),
        "{labels:?}"
    );
    assert_eq!(labels.len(), 11, "{labels:?}");
    assert!(!labels.iter().any(|l| l == "caught:chain"));
    // `after` and `inner-then` carry the chain's id: they are its links.
    let after = steps.iter().find(|s| s["label"] == "after").unwrap();
    assert_eq!(after["chain"], id.to_string());
}

#[tokio::test]
async fn a_failing_batch_in_a_chain_stops_it_and_runs_its_catch_once() {
    use redjob::workflow::Batch;
    let redis = TestRedis::start();
    let queue = redis.queue();
    let failing = Step {
        label: "bad-row".into(),
        fail: true,
        ..Step::default()
    };
    Chain::new(Step::new("first").dispatch())
        .then_batch(
            Batch::new()
                .job(failing.dispatch())
                .job(Step::new("row").dispatch()),
        )
        .then(Step::new("after").dispatch())
        .catch(
            Caught {
                label: "chain".into(),
            }
            .dispatch(),
        )
        .via(&queue)
        .dispatch()
        .await
        .unwrap();
    let _worker = start_worker(redis.url(), &["--concurrency", "1"]);
    wait_until(LONG, "the chain's catch ran", || async {
        labels(&steps(&redis).await)
            .iter()
            .any(|l| l == "caught:chain")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let labels = labels(&steps(&redis).await);
    assert_eq!(labels.iter().filter(|l| *l == "caught:chain").count(), 1);
    assert!(!labels.iter().any(|l| l == "after"), "{labels:?}");
}

#[tokio::test]
async fn a_chain_refuses_a_batch_where_it_cannot_run_one() {
    use redjob::workflow::Batch;
    let redis = TestRedis::start();
    let queue = redis.queue();
    let two_batches = Chain::new(Step::new("first").dispatch())
        .then_batch(Batch::new().job(Step::new("a").dispatch()))
        .then_batch(Batch::new().job(Step::new("b").dispatch()))
        .via(&queue)
        .dispatch()
        .await;
    assert!(
        matches!(two_batches, Err(Error::InvalidWorkflow(_))),
        "{two_batches:?}"
    );
    let two_catches = Chain::new(Step::new("first").dispatch())
        .then_batch(
            Batch::new()
                .job(Step::new("a").dispatch())
                .catch(Caught::default().dispatch()),
        )
        .catch(Caught::default().dispatch())
        .via(&queue)
        .dispatch()
        .await;
    assert!(
        matches!(two_catches, Err(Error::InvalidWorkflow(_))),
        "{two_catches:?}"
    );
    assert_eq!(queue.size("default").await.unwrap().total(), 0);
}
