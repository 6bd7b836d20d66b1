//! Every payload shape Laravel 8 through 13 writes is read, field for field, from fixtures
//! Laravel itself wrote (`tests/fixtures/laravel/`).

use redjob::payload::laravel::{job_data, rounded_numbers};
use redjob::Payload;
use serde::Deserialize;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/laravel/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("{path}: {err}"))
        .trim_end()
        .to_owned()
}

#[derive(Debug, Deserialize, PartialEq)]
struct Record {
    due_ms: u64,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Noop {}

#[test]
fn laravel_8_string_payloads_without_created_at_delay_or_retry_until_are_read() {
    for name in ["laravel8-push", "laravel8-later"] {
        let payload = Payload::from_json(&fixture(name)).unwrap();
        assert_eq!(payload.job, "record", "{name}");
        assert_eq!(payload.display_name, "record");
        assert_eq!(payload.attempts, 0);
        assert_eq!(payload.created_at, None);
        assert_eq!(payload.created_at(), None);
        assert_eq!(payload.delay, None);
        assert_eq!(payload.retry_until, None);
        assert_eq!(payload.max_tries, None);
        assert_eq!(payload.timeout, None);
        assert!(!payload.fail_on_timeout);
        let record: Record = job_data(payload.data.get()).unwrap();
        assert_eq!(
            record,
            Record {
                due_ms: 1763769600123
            }
        );
    }
}

#[test]
fn a_job_pushed_without_data_reads_as_a_job_without_fields() {
    for (name, data) in [
        ("laravel8-push-no-data", r#""""#),
        ("laravel8-push-empty-array", "[]"),
    ] {
        let payload = Payload::from_json(&fixture(name)).unwrap();
        assert_eq!(payload.data.get(), data, "{name}");
        assert_eq!(job_data::<Noop>(payload.data.get()).unwrap(), Noop {});
    }
}

#[test]
fn a_payload_re_encoded_by_laravels_worker_is_read_and_its_rounded_numbers_found() {
    for name in [
        "laravel8-reserved-by-laravel",
        "laravel8-released-by-laravel",
    ] {
        let raw = fixture(name);
        let payload = Payload::from_json(&raw).unwrap();
        assert_eq!(payload.attempts, 1, "{name}");
        assert_eq!(payload.job, "record");
        // The 13-digit number survives; the 17-digit one (12345678901234567) does not.
        let record: Record = job_data(payload.data.get()).unwrap();
        assert_eq!(
            record,
            Record {
                due_ms: 1763769600123
            }
        );
        assert_eq!(rounded_numbers(payload.data.get()), ["1.2345678901235e+16"]);
        assert!(payload.data.get().contains(r#""a\/b""#));
    }
    for name in ["laravel8-push", "laravel11-push"] {
        assert!(rounded_numbers(&fixture(name)).is_empty(), "{name}");
    }
}

#[test]
fn laravel_11_payloads_with_created_at_and_delay_are_read() {
    let payload = Payload::from_json(&fixture("laravel11-push")).unwrap();
    assert_eq!(payload.created_at, Some(1763769600));
    assert_eq!(
        payload.created_at().unwrap().to_rfc3339(),
        "2025-11-22T00:00:00+00:00"
    );
    assert_eq!(payload.delay, None);
    assert_eq!(payload.attempts, 0);
}

#[test]
fn null_fail_on_timeout_reads_as_false() {
    let raw =
        fixture("laravel8-push").replace(r#""failOnTimeout":false"#, r#""failOnTimeout":null"#);
    assert!(!Payload::from_json(&raw).unwrap().fail_on_timeout);
    let raw = fixture("laravel8-push").replace(r#""failOnTimeout":false,"#, "");
    assert!(!Payload::from_json(&raw).unwrap().fail_on_timeout);
}
