//! One rule for queue names on every side: a name no worker could take jobs from (empty, or with
//! a comma) is refused by dispatch, bulk dispatch, the worker's `--queue` and the operators'
//! command, with a typed error and before anything is written.

use examples::Noop;
use redjob::queue::keys::InvalidQueueName;
use redjob::{Bulk, Error};
use std::time::Duration;
use tests::jobs_command::JobsCommand;
use tests::worker_process::WorkerProcess;
use tests::TestRedis;

const LONG: Duration = Duration::from_secs(30);
const REFUSED: [&str; 2] = ["", "high,low"];

async fn key_count(redis: &TestRedis) -> u64 {
    redis::cmd("DBSIZE")
        .query_async(&mut redis.conn().await)
        .await
        .unwrap()
}

fn refused_name(err: &Error) -> &InvalidQueueName {
    match err {
        Error::InvalidQueueName(invalid) => invalid,
        other => panic!("expected InvalidQueueName, got {other:?}"),
    }
}

#[tokio::test]
async fn dispatch_and_bulk_dispatch_refuse_a_name_no_worker_could_take_and_write_nothing() {
    let redis = TestRedis::start();
    let queue = redis.queue();
    for name in REFUSED {
        let err = Noop {}
            .dispatch()
            .on_queue(name)
            .via(&queue)
            .await
            .unwrap_err();
        assert_eq!(refused_name(&err).name, name);

        let err = Noop {}
            .dispatch()
            .on_queue(name)
            .delay(30)
            .via(&queue)
            .await
            .unwrap_err();
        assert_eq!(refused_name(&err).name, name);

        // A valid job before the refused one is not pushed either.
        let mut bulk = Bulk::via(&queue);
        bulk.add(Noop {}.dispatch().on_queue("fine")).unwrap();
        bulk.add(Noop {}.dispatch().on_queue(name)).unwrap();
        let err = bulk.send().await.unwrap_err();
        assert_eq!(refused_name(&err).name, name);
    }
    assert_eq!(refused_name(&queue.clear("").await.unwrap_err()).name, "");
    assert_eq!(key_count(&redis).await, 0, "nothing was written");
}

#[tokio::test]
async fn the_worker_refuses_an_empty_queue_name_with_the_same_rule() {
    let redis = TestRedis::start();
    let mut worker = WorkerProcess::start(
        env!("CARGO_BIN_EXE_test_worker"),
        redis.url(),
        &["--queue", "default,,low"],
    );
    worker
        .wait_refused(LONG, "--queue: invalid queue name \"\": it is empty")
        .await;
    assert_eq!(key_count(&redis).await, 0, "nothing was written");
}

#[tokio::test]
async fn the_operators_command_and_library_refuse_the_same_names_and_write_nothing() {
    let redis = TestRedis::start();
    let jobsctl = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    for name in REFUSED {
        for args in [
            vec!["pause", name],
            vec!["resume", name],
            vec!["clear", name, "--force"],
            vec!["size", "fine", name],
            vec!["monitor", name, "--max", "1"],
            vec!["inspect", name],
            vec!["recent", name],
            vec!["retry", "--queue", name],
        ] {
            let ran = jobsctl.run(&args);
            assert_eq!(ran.code(), Some(2), "{args:?}: {}", ran.stderr);
            assert!(
                ran.stderr
                    .contains(&format!("invalid queue name {name:?}: it ")),
                "{args:?}: {}",
                ran.stderr
            );
            assert_eq!(ran.stdout, "", "{args:?}");
        }
    }

    // The library under the command and the dashboard applies the rule too.
    let admin = redjob::admin::Admin::new(redis.queue());
    for name in REFUSED {
        let err = admin.pause(name).await.unwrap_err();
        assert!(
            matches!(&err, redjob::admin::AdminError::Queue(e) if refused_name(e).name == name),
            "{err:?}"
        );
        assert!(admin.resume(name).await.is_err());
        assert!(admin.clear(name).await.is_err());
    }
    assert_eq!(key_count(&redis).await, 0, "nothing was written");
}
