//! The Sentinel harness itself, against Debian's `redis-server` and `redis-sentinel`: a
//! primary, a replica and three sentinels on loopback ports; the primary killed, a new one
//! elected, and the old one back as a replica.

use std::time::Duration;
use tests::sentinel::{TestSentinel, DOWN_AFTER};

#[test]
fn the_sentinels_elect_a_replica_when_the_primary_is_killed_and_take_the_old_one_back() {
    let mut deployment = TestSentinel::start(1);
    let first = deployment
        .primary_port()
        .expect("the sentinels name a primary");
    assert!(deployment.url().starts_with("redis+sentinel://127.0.0.1:"));
    assert_eq!(deployment.sentinel_ports().len(), 3);

    let killed = deployment.kill_primary();
    assert_eq!(killed, first);
    let second = deployment.wait_for_new_primary(killed, DOWN_AFTER + Duration::from_secs(20));
    assert_ne!(second, first);
    let mut conn = redis::Client::open(deployment.server(second).url())
        .unwrap()
        .get_connection()
        .unwrap();
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut conn).unwrap();
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec())),
        "the elected replica is a primary now"
    );

    deployment.restart(killed);
    let old = redis::Client::open(deployment.server(killed).url()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        // The sentinels' reconfiguration closes the server's client connections: a new one
        // each time.
        let role: Vec<redis::Value> = old
            .get_connection()
            .and_then(|mut conn| redis::cmd("ROLE").query(&mut conn))
            .unwrap_or_default();
        if role.first() == Some(&redis::Value::BulkString(b"slave".to_vec())) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old primary did not become a replica: {role:?}; the sentinels name {:?}",
            deployment.primary_port()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
