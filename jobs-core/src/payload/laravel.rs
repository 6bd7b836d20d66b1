//! What Laravel's side of a shared queue does to payloads, read back faithfully.
//!
//! - Laravel before 11 writes no `createdAt` and no `delay`; string jobs
//!   (`Queue::push('name', $data)`) carry no `retryUntil`; any option may be `null`. The
//!   [`Payload`](super::Payload) fields for them are optional.
//! - A job without data is pushed with Laravel's default data `""`, or as an empty PHP array,
//!   `[]`: [`job_data`] reads both as a job without fields.
//! - Laravel's worker reserves a job by decoding and re-encoding its payload with Lua's
//!   `cjson`, which writes numbers with 14 significant digits (C's `%.14g`). Integers up to
//!   10^14 survive exactly; a larger one, such as a 17-digit id, comes back rounded and in
//!   exponent form (`1.2345678901235e+16`). [`rounded_numbers`] finds such numbers so the
//!   worker can refuse the job with that reason instead of running it with a wrong value.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The `job` of the payloads Laravel writes for its job classes: `data.commandName` is the
/// class, `data.command` the object in PHP's `serialize()` format
/// ([`php`](super::php)). Jobs declared with `#[job(laravel = "...")]` are dispatched in this
/// form too, so a Laravel app's worker runs its own class's `handle()` on them.
pub const CALL_QUEUED_HANDLER: &str = "Illuminate\\Queue\\CallQueuedHandler@call";

/// An Eloquent model in a queued Laravel job class: Laravel's `SerializesModels` queues a model
/// (or a collection of models) as this identifier, and the handler loads it by it.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct ShipOrder {
///     order: redjob::payload::laravel::ModelIdentifier,
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelIdentifier {
    /// The model's class, as `App\\Models\\Order`.
    pub class: String,
    /// The model's key, or the keys of a collection of models.
    pub id: serde_json::Value,
    /// The relations loaded on the model when it was queued.
    #[serde(default)]
    pub relations: Vec<String>,
    /// The database connection of the model, when not the default.
    pub connection: Option<String>,
    /// For a collection of models, the collection's class (Laravel 9 and later).
    #[serde(default)]
    pub collection_class: Option<String>,
}

/// Decodes a job's `data`, reading Laravel's `""` and `[]` (a job pushed without data) as a
/// job without fields: a struct with no fields, or a unit struct.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Noop {}
/// #[derive(serde::Deserialize)]
/// struct Ping;
/// assert!(redjob::payload::laravel::job_data::<Noop>(r#""""#).is_ok());
/// assert!(redjob::payload::laravel::job_data::<Noop>("[]").is_ok());
/// assert!(redjob::payload::laravel::job_data::<Ping>(r#""""#).is_ok());
/// assert!(redjob::payload::laravel::job_data::<Noop>(r#""x""#).is_err());
/// ```
pub fn job_data<J: DeserializeOwned>(data: &str) -> serde_json::Result<J> {
    match serde_json::from_str(data) {
        Ok(job) => Ok(job),
        Err(err) if matches!(data.trim(), r#""""# | "[]") => serde_json::from_str("{}")
            .or_else(|_| serde_json::from_str("null"))
            .map_err(|_| err),
        Err(err) => Err(err),
    }
}

/// The numbers in `json` (outside strings) that Lua's `cjson` rounded to 14 significant
/// digits: written as `%.14g` writes a number it had to cut, in exponent form with a signed
/// exponent of at least two digits and a 14-digit mantissa. Numbers written by serde_json or
/// by PHP never have that form, and integers up to 10^14 are never rounded.
///
/// ```
/// use redjob::payload::laravel::rounded_numbers;
/// let data = r#"{"big":1.2345678901235e+16,"id":7,"text":"1.2345678901235e+16","f":1.5e+20}"#;
/// assert_eq!(rounded_numbers(data), ["1.2345678901235e+16"]);
/// assert!(rounded_numbers(r#"{"id":12345678901234567,"x":1.2345678901234567e16}"#).is_empty());
/// ```
pub fn rounded_numbers(json: &str) -> Vec<&str> {
    let bytes = json.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => at = end_of_string(bytes, at),
            b'-' | b'0'..=b'9' => {
                let end = end_of_number(bytes, at);
                let number = &json[at..end];
                if is_rounded_by_cjson(number) {
                    found.push(number);
                }
                at = end;
            }
            _ => at += 1,
        }
    }
    found
}

/// The index just past the string that starts with the quote at `start`.
fn end_of_string(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The index just past the number that starts at `start`.
fn end_of_number(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() && matches!(bytes[at], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
        at += 1;
    }
    at
}

/// Whether `number` has the form `%.14g` gives a number it rounded: a mantissa of 14
/// significant digits and an exponent with a sign and at least two digits.
fn is_rounded_by_cjson(number: &str) -> bool {
    let Some((mantissa, exponent)) = number.split_once(['e', 'E']) else {
        return false;
    };
    let signed_two_digits = exponent.len() >= 3
        && exponent.starts_with(['+', '-'])
        && exponent[1..].bytes().all(|b| b.is_ascii_digit());
    let significant = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&b| b == b'0')
        .count();
    signed_two_digits && significant == 14
}
