//! Laravel's Context (Laravel 11 and later), as it travels with a job: the payload key
//! `illuminate:log:context`.

use serde::de::{Deserializer, Error as _};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

use crate::payload::php;

/// The Context a job was dispatched with: `data` that Laravel adds to every log line, and
/// `hidden` data it keeps out of logs. Laravel writes each value with PHP's `serialize()`;
/// this type keeps those texts as they are, so a context passes through Rust unchanged, and
/// reads values out of them as [`php::unserialize`] does.
///
/// A handler reads it with [`JobContext::log_context`](crate::JobContext::log_context); a
/// dispatch sets it with [`PendingDispatch::log_context`](crate::PendingDispatch::log_context),
/// for example to pass its own job's context on. Its `Debug` output never shows hidden values.
///
/// ```
/// use redjob::payload::LogContext;
/// use serde_json::json;
///
/// let context = LogContext::new().with("tenant", 42).with_hidden("api_key", "s3cret");
/// assert_eq!(context.get("tenant"), Some(json!(42)));
/// assert_eq!(context.raw("tenant"), Some("i:42;"));
/// assert!(!format!("{context:?}").contains("s3cret"));
/// assert_eq!(
///     serde_json::to_string(&context).unwrap(),
///     r#"{"data":{"tenant":"i:42;"},"hidden":{"api_key":"s:6:\"s3cret\";"}}"#
/// );
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LogContext {
    data: BTreeMap<String, String>,
    hidden: BTreeMap<String, String>,
}

impl LogContext {
    /// An empty context.
    pub fn new() -> LogContext {
        LogContext::default()
    }

    /// This context with `key` set to `value`, written as PHP's `serialize()` writes it.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> LogContext {
        self.data.insert(key.into(), php::serialize(&value.into()));
        self
    }

    /// This context with the hidden `key` set to `value`.
    pub fn with_hidden(mut self, key: impl Into<String>, value: impl Into<Value>) -> LogContext {
        self.hidden
            .insert(key.into(), php::serialize(&value.into()));
        self
    }

    /// The value of `key`, when it is set and reads as [`php::unserialize`] reads.
    pub fn get(&self, key: &str) -> Option<Value> {
        php::unserialize(self.raw(key)?.as_bytes()).ok()
    }

    /// The hidden value of `key`, when it is set and reads as [`php::unserialize`] reads.
    pub fn get_hidden(&self, key: &str) -> Option<Value> {
        php::unserialize(self.hidden.get(key)?.as_bytes()).ok()
    }

    /// The serialized text of `key`, as PHP wrote it.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.data.get(key).map(String::as_str)
    }

    /// The keys of the data, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.data.keys().map(String::as_str)
    }

    /// Whether neither data nor hidden data is set.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.hidden.is_empty()
    }
}

impl fmt::Debug for LogContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogContext")
            .field("data", &self.data)
            .field("hidden", &self.hidden.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Written as Laravel writes it: an empty part is PHP's empty array, `[]`.
impl Serialize for LogContext {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Part<'a>(&'a BTreeMap<String, String>);
        impl Serialize for Part<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if self.0.is_empty() {
                    return serializer.serialize_seq(Some(0))?.end();
                }
                self.0.serialize(serializer)
            }
        }
        use serde::ser::SerializeSeq as _;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("data", &Part(&self.data))?;
        map.serialize_entry("hidden", &Part(&self.hidden))?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for LogContext {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LogContext, D::Error> {
        #[derive(Deserialize)]
        struct Parts {
            #[serde(default)]
            data: Value,
            #[serde(default)]
            hidden: Value,
        }
        let parts = Parts::deserialize(deserializer)?;
        Ok(LogContext {
            data: part(parts.data).map_err(D::Error::custom)?,
            hidden: part(parts.hidden).map_err(D::Error::custom)?,
        })
    }
}

/// One part, as PHP's `json_encode` writes an array of strings: an object, or `[]` (or
/// nothing) when empty.
fn part(value: Value) -> Result<BTreeMap<String, String>, &'static str> {
    match value {
        Value::Null => Ok(BTreeMap::new()),
        Value::Array(items) if items.is_empty() => Ok(BTreeMap::new()),
        Value::Object(entries) => entries
            .into_iter()
            .map(|(key, value)| match value {
                Value::String(text) => Ok((key, text)),
                _ => Err("a context value that is not a serialized string"),
            })
            .collect(),
        _ => Err("a context part that is neither an object nor []"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_laravel_writes_with_empty_parts_as_arrays() {
        let json =
            r#"{"data":{"request_id":"s:4:\"r-42\";","ids":"a:2:{i:0;i:1;i:1;i:2;}"},"hidden":[]}"#;
        let context: LogContext = serde_json::from_str(json).unwrap();
        assert_eq!(context.get("request_id"), Some(Value::from("r-42")));
        assert_eq!(context.get("ids"), Some(serde_json::json!([1, 2])));
        assert_eq!(serde_json::to_string(&context).unwrap(), json);
    }
}
