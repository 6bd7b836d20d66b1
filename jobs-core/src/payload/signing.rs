//! Payload signing: an HMAC-SHA256 over everything that says what a job is and does, so that
//! write access to Redis alone cannot make a worker run arbitrary jobs with arbitrary data.
//!
//! A handle with a [`SigningKey`] ([`QueueConfig::signing_key`](crate::QueueConfig), by
//! default read from [`SIGNING_KEY_ENV`]) signs every payload it pushes; a worker whose handle
//! has a key fails every payload without a valid signature into the failed-job store with the
//! reason "signature mismatch", without running it.
//!
//! The signature covers every payload field except `attempts`, which the pop script raises at
//! each reservation, `requeues` and `interruptions`, which a worker raises when a middleware
//! requeues the job or a stopping worker puts it back, and the signature itself: `uuid`, `displayName`, `job`, `maxTries`,
//! `maxExceptions`, `failOnTimeout`, `backoff`, `timeout`, `retryUntil`, `createdAt`, `id`,
//! `delay`, and `data` byte for byte, and, when a payload has any of them, `unique`, `through`
//! and `tags` (message version 2), `chain` and `batch` (version 3) and Laravel's Context,
//! `illuminate:log:context` (version 4). The trace context (`traceparent`, `tracestate`) is
//! not signed: it says where a job came from, never what it does, and whatever relays a
//! payload may rewrite it. The version 1 message is the JSON array
//! `["jobs-payload-v1", uuid, displayName, job, maxTries, maxExceptions, failOnTimeout,
//! backoff, timeout, retryUntil, createdAt, id, delay, data]`; version 2 is the same array
//! tagged `"jobs-payload-v2"` with `[unique, through, tags]` appended; version 3, for a job of
//! a workflow, is version 2's array tagged `"jobs-payload-v3"` with `[chain, batch]` appended;
//! version 4, for a payload with a Context, is version 3's array tagged `"jobs-payload-v4"`
//! with `[context]` appended. The signature is its HMAC-SHA256 under the key, as 64 lowercase hex digits in the payload's `signature` field.
//!
//! ```
//! use redjob::payload::signing::SigningKey;
//! use redjob::Payload;
//!
//! let key = SigningKey::new("a long random secret shared by dispatchers and workers");
//! let json = r#"{"uuid":"9f0c1d57-7d6a-4c3b-9a55-0b1c8f6e2a10","displayName":"SendInvoice",
//!   "job":"SendInvoice","maxTries":3,"maxExceptions":null,"failOnTimeout":false,
//!   "backoff":null,"timeout":null,"retryUntil":null,"data":{"id":7},
//!   "createdAt":1763769600,"id":"9f0c1d577d6a4c3b9a550b1c8f6e2a10","attempts":0,"delay":null}"#;
//! let mut payload = Payload::from_json(json).unwrap();
//! assert!(key.verify(&payload).is_err(), "an unsigned payload does not verify");
//!
//! payload.signature = Some(key.sign(&payload));
//! payload.attempts = 2; // raised by reservations: not signed
//! assert!(key.verify(&payload).is_ok());
//!
//! payload.data = serde_json::value::to_raw_value(&serde_json::json!({"id": 8})).unwrap();
//! assert!(key.verify(&payload).is_err(), "altered data does not verify");
//! ```

use ring::hmac;
use serde_json::value::RawValue;
use std::fmt::Write as _;

use crate::payload::{decode_hex, Payload};

/// The environment variable [`QueueConfig::default`](crate::QueueConfig) reads the signing key
/// from: its text, as bytes, is the key. Unset or empty: no signing.
pub const SIGNING_KEY_ENV: &str = "JOBS_SIGNING_KEY";

/// Tags the signed message, so that a signature over this message format can never be taken
/// for one over another.
const MESSAGE_VERSION: &str = "jobs-payload-v1";

/// Tags the message of a payload with fields added since v1 (`unique`, `through`, `tags`):
/// v1's fields, then those. A payload without them is signed as v1, so v1 signatures still
/// verify.
const MESSAGE_VERSION_2: &str = "jobs-payload-v2";

/// Tags the message of a payload that belongs to a workflow (`chain`, `batch`): v2's message,
/// then those fields.
const MESSAGE_VERSION_3: &str = "jobs-payload-v3";

/// Tags the message of a payload with Laravel's Context (`illuminate:log:context`): v3's
/// message, then the context.
const MESSAGE_VERSION_4: &str = "jobs-payload-v4";

/// A secret key for signing payloads with HMAC-SHA256. Dispatchers and workers must share it.
/// Use at least 32 random bytes, for example the output of `openssl rand -hex 32`.
///
/// Its `Debug` output never shows the key.
#[derive(Clone)]
pub struct SigningKey(hmac::Key);

/// Why a payload's signature was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The payload has no `signature` field.
    #[error("signature mismatch: the payload is not signed")]
    Missing,
    /// The signature does not match the payload: it was altered, or signed with another key.
    #[error("signature mismatch: the payload was altered or signed with another key")]
    Mismatch,
}

impl SigningKey {
    /// A key made of these bytes.
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        SigningKey(hmac::Key::new(hmac::HMAC_SHA256, secret.as_ref()))
    }

    /// The key in [`SIGNING_KEY_ENV`], if that variable is set and not empty.
    pub fn from_env() -> Option<Self> {
        std::env::var_os(SIGNING_KEY_ENV)
            .filter(|secret| !secret.is_empty())
            .map(|secret| SigningKey::new(secret.as_encoded_bytes()))
    }

    /// The signature of `payload`: 64 lowercase hex digits, for its `signature` field.
    pub fn sign(&self, payload: &Payload) -> String {
        let tag = hmac::sign(&self.0, signed_message(payload).as_bytes());
        let mut hex = String::with_capacity(2 * tag.as_ref().len());
        for byte in tag.as_ref() {
            write!(hex, "{byte:02x}").expect("writing to a String cannot fail");
        }
        hex
    }

    /// Checks `payload`'s `signature` field against its content, in constant time.
    pub fn verify(&self, payload: &Payload) -> Result<(), SignatureError> {
        let signature = payload
            .signature
            .as_deref()
            .ok_or(SignatureError::Missing)?;
        let tag = decode_hex(signature).ok_or(SignatureError::Mismatch)?;
        hmac::verify(&self.0, signed_message(payload).as_bytes(), &tag)
            .map_err(|_| SignatureError::Mismatch)
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

/// The message a payload's signature is computed over: every field but `attempts` and
/// `signature`, in a fixed order, as one JSON array. `data` is kept byte for byte.
fn signed_message(payload: &Payload) -> String {
    let data: &RawValue = &payload.data;
    let v4 = payload.log_context.is_some();
    let v3 = v4 || payload.chain.is_some() || payload.batch.is_some();
    let v2 =
        v3 || payload.unique.is_some() || !payload.through.is_empty() || !payload.tags.is_empty();
    let version = match (v2, v3, v4) {
        (_, _, true) => MESSAGE_VERSION_4,
        (_, true, false) => MESSAGE_VERSION_3,
        (true, false, false) => MESSAGE_VERSION_2,
        (false, false, false) => MESSAGE_VERSION,
    };
    let fields = (
        version,
        &payload.uuid,
        &payload.display_name,
        &payload.job,
        payload.max_tries,
        payload.max_exceptions,
        payload.fail_on_timeout,
        &payload.backoff,
        payload.timeout,
        payload.retry_until,
        payload.created_at,
        &payload.id,
        &payload.delay,
        data,
    );
    let mut message = serde_json::to_string(&fields).expect("payload fields always serialize");
    // Each later version: the earlier one's array, then the fields it added, as one more array.
    let mut append = |added: String| {
        message.pop();
        message.push(',');
        message.push_str(&added);
        message.push(']');
    };
    if v2 {
        let added = (&payload.unique, &payload.through, &payload.tags);
        append(serde_json::to_string(&added).expect("fields always serialize"));
    }
    if v3 {
        let added = (&payload.chain, &payload.batch);
        append(serde_json::to_string(&added).expect("fields always serialize"));
    }
    if v4 {
        let added = (&payload.log_context,);
        append(serde_json::to_string(&added).expect("fields always serialize"));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Payload {
        Payload::from_json(
            r#"{"uuid":"9f0c1d57-7d6a-4c3b-9a55-0b1c8f6e2a10","displayName":"Send",
            "job":"Send","maxTries":3,"maxExceptions":null,"failOnTimeout":false,
            "backoff":"1,5","timeout":30,"retryUntil":null,"data":{"id":7},
            "createdAt":1763769600,"id":"9f0c1d577d6a4c3b9a550b1c8f6e2a10","attempts":0,
            "delay":2.5}"#,
        )
        .unwrap()
    }

    #[test]
    fn every_field_but_attempts_is_signed() {
        let key = SigningKey::new("secret");
        let mut signed = payload();
        signed.signature = Some(key.sign(&signed));
        assert_eq!(signed.signature.as_ref().unwrap().len(), 64);
        let alterations: [fn(&mut Payload); 12] = [
            |p| p.uuid = uuid::Uuid::nil(),
            |p| p.display_name.push('x'),
            |p| p.job = "Other".into(),
            |p| p.max_tries = Some(0),
            |p| p.max_exceptions = Some(1),
            |p| p.fail_on_timeout = true,
            |p| p.backoff = None,
            |p| p.timeout = None,
            |p| p.retry_until = Some(1),
            |p| p.created_at = p.created_at.map(|at| at + 1),
            |p| p.id.push('0'),
            |p| p.delay = None,
        ];
        for (i, alter) in alterations.iter().enumerate() {
            let mut altered = signed.clone();
            alter(&mut altered);
            assert_eq!(
                key.verify(&altered),
                Err(SignatureError::Mismatch),
                "alteration {i}"
            );
        }
        let mut reserved = signed.clone();
        reserved.attempts = 5;
        assert_eq!(key.verify(&reserved), Ok(()));
    }

    #[test]
    fn the_trace_context_is_not_signed_and_laravels_context_is() {
        let key = SigningKey::new("secret");
        let mut signed = payload();
        signed.log_context = Some(crate::payload::LogContext::new().with("tenant", 42));
        signed.signature = Some(key.sign(&signed));
        let mut traced = signed.clone();
        traced.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
        traced.tracestate = Some("vendor=1".into());
        assert_eq!(key.verify(&traced), Ok(()));
        let mut altered = signed.clone();
        altered.log_context = Some(crate::payload::LogContext::new().with("tenant", 43));
        assert_eq!(key.verify(&altered), Err(SignatureError::Mismatch));
        altered.log_context = None;
        assert_eq!(key.verify(&altered), Err(SignatureError::Mismatch));
    }

    #[test]
    fn data_is_compared_byte_for_byte_and_keys_must_match() {
        let key = SigningKey::new("secret");
        let mut signed = payload();
        signed.signature = Some(key.sign(&signed));
        let json = signed.to_json().replace(r#"{"id":7}"#, r#"{"id": 7}"#);
        let respaced = Payload::from_json(&json).unwrap();
        assert_eq!(key.verify(&respaced), Err(SignatureError::Mismatch));
        assert_eq!(
            SigningKey::new("other").verify(&signed),
            Err(SignatureError::Mismatch)
        );
        let mut garbled = signed.clone();
        garbled.signature = Some("zz".repeat(32));
        assert_eq!(key.verify(&garbled), Err(SignatureError::Mismatch));
        assert_eq!(
            format!("{key:?}"),
            "SigningKey(<redacted>)",
            "the key is never printed"
        );
    }
}
