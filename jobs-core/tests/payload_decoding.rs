//! Property test of the payload decoder: arbitrary bytes, and valid payloads with random
//! corruption, never panic; a payload that decodes always has its attempts field located.
//! The same for the reader of PHP's serialize() format, which Laravel's job classes arrive
//! in.

use redjob::payload::php::{serialize_object, unserialize, unserialize_object};
use redjob::payload::{unreserved, with_attempts};
use redjob::Payload;
use serde_json::{json, Map, Value};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const VALID: &str = r#"{"uuid":"9f0c1d57-7d6a-4c3b-9a55-0b1c8f6e2a10","displayName":"SendInvoice","job":"SendInvoice","maxTries":3,"maxExceptions":null,"failOnTimeout":false,"backoff":"1,5,10","timeout":null,"retryUntil":null,"data":{"id":7,"note":"attempts"},"createdAt":1763769600,"id":"9f0c1d577d6a4c3b9a550b1c8f6e2a10","attempts":2,"delay":null}"#;

fn exercise(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let decoded = Payload::from_json(&text);
    let _ = unreserved(&text);
    if let Some(patched) = with_attempts(&text, 7) {
        // Setting the attempts is idempotent: the patch finds the same field again.
        assert_eq!(
            with_attempts(&patched, 7).as_deref(),
            Some(patched.as_str())
        );
    }
    if let Ok(payload) = decoded {
        // A payload that decodes has a top-level attempts number, and the patch moves it.
        let raised = with_attempts(&text, payload.attempts + 1).expect("attempts located");
        assert_eq!(
            Payload::from_json(&raised).unwrap().attempts,
            payload.attempts + 1
        );
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = rng.below(400);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        exercise(&bytes);
    }
}

#[test]
fn corrupted_valid_payloads_never_panic() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let valid = VALID.as_bytes();
    let alphabet = br#"{}[]":,0123456789 -.\aetrupmsn"#;
    for _ in 0..20_000 {
        let mut bytes = valid.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = alphabet[rng.below(alphabet.len())],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, alphabet[rng.below(alphabet.len())]),
            }
            if bytes.is_empty() {
                break;
            }
        }
        exercise(&bytes);
    }
    // The untouched payload decodes, and its attempts move as expected.
    let payload = Payload::from_json(VALID).unwrap();
    assert_eq!(payload.attempts, 2);
    assert_eq!(Payload::from_json(&unreserved(VALID)).unwrap().attempts, 1);
}

/// A Laravel 8.83 job class as `serialize()` wrote it (tests/laravel/bootstrap.php's
/// SendInvoice): a protected and a private property, and Laravel's Queueable properties.
const PHP_COMMAND: &[u8] = b"O:11:\"SendInvoice\":13:{s:5:\"tries\";i:3;s:7:\"\0*\0note\";s:12:\"first/second\";s:18:\"\0SendInvoice\0lines\";a:2:{s:1:\"a\";d:1.5;s:1:\"b\";a:2:{i:0;i:1;i:1;i:2;}}s:2:\"id\";i:7;s:10:\"connection\";N;s:5:\"queue\";N;s:15:\"chainConnection\";N;s:10:\"chainQueue\";N;s:19:\"chainCatchCallbacks\";N;s:5:\"delay\";N;s:11:\"afterCommit\";N;s:10:\"middleware\";a:0:{}s:7:\"chained\";a:0:{}}";

#[test]
fn a_laravel_job_class_reads_with_its_properties_unmangled() {
    let (class, properties) = unserialize_object(PHP_COMMAND).unwrap();
    assert_eq!(class, "SendInvoice");
    assert_eq!(properties["id"], 7);
    assert_eq!(properties["note"], "first/second");
    assert_eq!(
        properties["lines"],
        serde_json::json!({"a": 1.5, "b": [1, 2]})
    );
    assert_eq!(properties["connection"], serde_json::Value::Null);
    assert_eq!(properties["chained"], serde_json::json!([]));
}

#[test]
fn php_values_this_reader_does_not_take_are_refused_with_a_reason() {
    for (input, reason) in [
        (&b"C:3:\"Foo\":0:{}"[..], "a kind this reader does not take"),
        (b"r:1;", "a kind this reader does not take"),
        (b"i:7;i:8;", "bytes after the value"),
        (b"s:10:\"short\";", "a string runs past the end"),
        (b"d:INF;", "a float that is not finite"),
        (b"i:7;", "not an object"),
    ] {
        let err = unserialize_object(input).unwrap_err();
        assert!(err.reason.starts_with(reason), "{input:?}: {err}");
    }
    let deep = "a:1:{i:0;".repeat(200) + "N;" + &"}".repeat(200);
    assert_eq!(
        unserialize(deep.as_bytes()).unwrap_err().reason,
        "nested too deeply"
    );
}

#[test]
fn arbitrary_and_corrupted_php_serializations_never_panic() {
    let mut rng = Rng(0x005e_ed0f_9a7a);
    for _ in 0..20_000 {
        let len = rng.below(64);
        let bytes: Vec<u8> = (0..len)
            .map(|_| b"aOsidbN:;{}\"0123456789-."[rng.below(24)])
            .collect();
        let _ = unserialize(&bytes);
    }
    for _ in 0..20_000 {
        let mut bytes = PHP_COMMAND.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = rng.next() as u8,
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.truncate(at),
            }
            if bytes.is_empty() {
                break;
            }
        }
        let _ = unserialize_object(&bytes);
    }
}

/// A random JSON value of the kinds a job struct serializes to, nested at most `depth` deep.
/// Objects are never empty: PHP has one empty array for `[]` and `{}`, read back as `[]`.
fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth == 0 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 1),
        2 => json!(rng.next() as i64),
        3 => json!((rng.next() % 1_000_000) as f64 / 7.0),
        4 => {
            let len = rng.below(12);
            let text: String = (0..len)
                .map(|_| ['a', 'é', '"', ';', '{', '\\', '0', ' ', '€'][rng.below(9)])
                .collect();
            Value::String(text)
        }
        5 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(random_object(rng, depth - 1)),
    }
}

fn random_object(rng: &mut Rng, depth: usize) -> Map<String, Value> {
    (0..1 + rng.below(4))
        .map(|i| (format!("field_{i}"), random_value(rng, depth)))
        .collect()
}

#[test]
fn serialized_objects_read_back_as_they_were_written() {
    let mut rng = Rng(0x0bad_cafe_f00d_0001);
    for _ in 0..5_000 {
        let properties = Value::Object(random_object(&mut rng, 3));
        let php = serialize_object("App\\Jobs\\Example", &properties);
        assert_eq!(
            unserialize_object(php.as_bytes()).unwrap(),
            ("App\\Jobs\\Example".to_owned(), properties.clone()),
            "{php}"
        );
    }
}
