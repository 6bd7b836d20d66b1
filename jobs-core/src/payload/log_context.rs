//! Laravel's Context (Laravel 11 and later), as it travels with a job: the payload key
//! `illuminate:log:context`.

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    data: Entries,
    hidden: Entries,
}

/// Keys and serialized values, in the order they were set, as a PHP array keeps them.
type Entries = Vec<(String, String)>;

/// Sets `key` to `value` in `entries`, in its place when it was set before.
fn set(entries: &mut Entries, key: String, value: String) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

fn find<'a>(entries: &'a Entries, key: &str) -> Option<&'a str> {
    entries
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, value)| value.as_str())
}

impl LogContext {
    /// An empty context.
    pub fn new() -> LogContext {
        LogContext::default()
    }

    /// This context with `key` set to `value`, written as PHP's `serialize()` writes it.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> LogContext {
        set(&mut self.data, key.into(), php::serialize(&value.into()));
        self
    }

    /// This context with the hidden `key` set to `value`.
    pub fn with_hidden(mut self, key: impl Into<String>, value: impl Into<Value>) -> LogContext {
        set(&mut self.hidden, key.into(), php::serialize(&value.into()));
        self
    }

    /// The value of `key`, when it is set and reads as [`php::unserialize`] reads.
    pub fn get(&self, key: &str) -> Option<Value> {
        php::unserialize(self.raw(key)?.as_bytes()).ok()
    }

    /// The hidden value of `key`, when it is set and reads as [`php::unserialize`] reads.
    pub fn get_hidden(&self, key: &str) -> Option<Value> {
        php::unserialize(find(&self.hidden, key)?.as_bytes()).ok()
    }

    /// The serialized text of `key`, as PHP wrote it.
    pub fn raw(&self, key: &str) -> Option<&str> {
        find(&self.data, key)
    }

    /// The keys of the data, in the order they were set.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.data.iter().map(|(key, _)| key.as_str())
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
            .field(
                "hidden",
                &self.hidden.iter().map(|(key, _)| key).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Written as Laravel writes it: an empty part is PHP's empty array, `[]`.
impl Serialize for LogContext {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Part<'a>(&'a Entries);
        impl Serialize for Part<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if self.0.is_empty() {
                    return serializer.serialize_seq(Some(0))?.end();
                }
                let mut map = serializer.serialize_map(Some(self.0.len()))?;
                for (key, value) in self.0 {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
        use serde::ser::SerializeSeq as _;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("data", &Part(&self.data))?;
        map.serialize_entry("hidden", &Part(&self.hidden))?;
        map.end()
    }
}

/// The visitor methods of every scalar (and null), each returning `$empty`.
macro_rules! scalars_read_as {
    ($empty:expr) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($empty)
        }
    };
}

/// Read leniently: a context is never a reason a payload cannot run. What is not Laravel's
/// shape (a part that is not an object, a value that is not a string) reads as not set.
impl<'de> Deserialize<'de> for LogContext {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LogContext, D::Error> {
        struct Context;
        impl<'de> Visitor<'de> for Context {
            type Value = LogContext;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("Laravel's Context: {\"data\": {...}, \"hidden\": {...}}")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LogContext, A::Error> {
                let mut context = LogContext::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "data" => context.data = map.next_value::<Part>()?.0,
                        "hidden" => context.hidden = map.next_value::<Part>()?.0,
                        _ => drop(map.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(context)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LogContext, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LogContext::default())
            }

            scalars_read_as!(LogContext::default());
        }
        deserializer.deserialize_any(Context)
    }
}

/// One part, as PHP's `json_encode` writes an array of strings: an object, in its order, or
/// `[]` when empty. Entries whose value is not a string, and parts of another shape, are
/// skipped.
struct Part(Entries);

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Part, D::Error> {
        deserializer.deserialize_any(PartVisitor)
    }
}

struct PartVisitor;

impl<'de> Visitor<'de> for PartVisitor {
    type Value = Part;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of serialized strings, or []")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
        let mut entries = Entries::new();
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            if let Value::String(value) = value {
                set(&mut entries, key, value);
            }
        }
        Ok(Part(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Part, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Part(Entries::new()))
    }

    scalars_read_as!(Part(Entries::new()));
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

    #[test]
    fn what_is_not_laravels_shape_reads_as_not_set_and_never_fails() {
        for json in [r#""text""#, "7", "[1]", r#"{"data":"x","hidden":{"k":1}}"#] {
            let context: LogContext = serde_json::from_str(json).unwrap();
            assert!(context.is_empty(), "{json}");
        }
        let mixed: LogContext =
            serde_json::from_str(r#"{"data":{"a":1,"b":"i:2;"},"other":true}"#).unwrap();
        assert_eq!(mixed.keys().collect::<Vec<_>>(), ["b"]);
    }
}
