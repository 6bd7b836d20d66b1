//! PHP's `serialize()` format, as a Laravel app writes the job objects it queues
//! (`data.command` of a `CallQueuedHandler` payload), read into JSON so a Rust job type can be
//! filled from a PHP object's properties.
//!
//! Values map as `json_encode` would map them: `N` null, `b` bool, `i` and `d` numbers, `s`
//! strings, `a` arrays (a list when its keys are 0, 1, 2, ..., else an object with string
//! keys), and `O` objects, whose properties keep their names: protected (`\0*\0name`) and
//! private (`\0Class\0name`) names are unmangled. The class of a nested object is dropped;
//! [`unserialize_object`] returns the outer one's. Custom-serialized objects (`C`) and
//! references (`r`, `R`) are refused, as is anything nested deeper than [`MAX_DEPTH`].
//!
//! [`serialize_object`] writes the other way: a job's JSON as an object of a PHP class, its
//! fields as properties (PHP gives a property written with its plain name to a declared
//! protected or private property of that name), nested objects as PHP arrays.

use serde_json::{Map, Number, Value};

/// How deeply values may nest.
pub const MAX_DEPTH: usize = 128;

/// Why bytes are not a PHP value this module reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a PHP serialized value: {reason} at byte {at}")]
pub struct PhpError {
    /// Where reading stopped.
    pub at: usize,
    /// What was wrong there.
    pub reason: &'static str,
}

/// The value `input` holds; the whole input must be one value.
///
/// ```
/// use redjob::payload::php::unserialize;
/// let value = unserialize(br#"a:2:{i:0;s:1:"a";i:1;b:1;}"#).unwrap();
/// assert_eq!(value, serde_json::json!(["a", true]));
/// ```
pub fn unserialize(input: &[u8]) -> Result<Value, PhpError> {
    let mut reader = Reader { input, at: 0 };
    let value = reader.value(0)?;
    if reader.at != input.len() {
        return Err(reader.error("bytes after the value"));
    }
    Ok(value.1)
}

/// The class and properties of the object `input` holds.
///
/// ```
/// use redjob::payload::php::unserialize_object;
/// let php = b"O:8:\"App\\Mail\":3:{s:2:\"id\";i:7;s:7:\"\0*\0note\";s:2:\"hi\";s:14:\"\0App\\Mail\0code\";d:1.5;}";
/// let (class, properties) = unserialize_object(php).unwrap();
/// assert_eq!(class, "App\\Mail");
/// assert_eq!(properties, serde_json::json!({"id": 7, "note": "hi", "code": 1.5}));
/// ```
pub fn unserialize_object(input: &[u8]) -> Result<(String, Value), PhpError> {
    let mut reader = Reader { input, at: 0 };
    let (class, value) = reader.value(0)?;
    if reader.at != input.len() {
        return Err(reader.error("bytes after the value"));
    }
    match class {
        Some(class) => Ok((class, value)),
        None => Err(PhpError {
            at: 0,
            reason: "not an object",
        }),
    }
}

/// `properties` (a JSON object) as an object of the PHP class `class`, in `serialize()`'s
/// format.
///
/// ```
/// use redjob::payload::php::{serialize_object, unserialize_object};
/// let properties = serde_json::json!({"id": 7, "lines": [1.5, "a"], "paid": false, "note": null});
/// let php = serialize_object("App\\Mail", &properties);
/// assert_eq!(
///     php,
///     r#"O:8:"App\Mail":4:{s:2:"id";i:7;s:5:"lines";a:2:{i:0;d:1.5;i:1;s:1:"a";}s:4:"note";N;s:4:"paid";b:0;}"#
/// );
/// assert_eq!(unserialize_object(php.as_bytes()).unwrap(), ("App\\Mail".to_owned(), properties));
/// ```
pub fn serialize_object(class: &str, properties: &Value) -> String {
    let mut out = format!("O:{}:\"{class}\":", class.len());
    match properties {
        Value::Object(map) => write_entries(&mut out, map.iter().map(|(k, v)| (k.as_str(), v))),
        _ => out.push_str("0:{}"),
    }
    out
}

/// `value` in `serialize()`'s format, as PHP writes the array or scalar `json_decode` would
/// read from it (objects as arrays with string keys).
///
/// ```
/// use redjob::payload::php::{serialize, unserialize};
/// let value = serde_json::json!({"ids": [1, 2], "name": "é"});
/// assert_eq!(serialize(&value), r#"a:2:{s:3:"ids";a:2:{i:0;i:1;i:1;i:2;}s:4:"name";s:2:"é";}"#);
/// assert_eq!(unserialize(serialize(&value).as_bytes()).unwrap(), value);
/// ```
pub fn serialize(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// One value in `serialize()`'s format.
fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("N;"),
        Value::Bool(b) => out.push_str(if *b { "b:1;" } else { "b:0;" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&format!("i:{i};")),
            None => out.push_str(&format!("d:{};", n.as_f64().unwrap_or_default())),
        },
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push_str(&format!("a:{}:{{", items.len()));
            for (index, item) in items.iter().enumerate() {
                out.push_str(&format!("i:{index};"));
                write_value(out, item);
            }
            out.push('}');
        }
        Value::Object(map) => {
            out.push_str("a:");
            write_entries(out, map.iter().map(|(k, v)| (k.as_str(), v)));
        }
    }
}

/// `count:{key;value...}` with string keys.
fn write_entries<'v>(
    out: &mut String,
    entries: impl ExactSizeIterator<Item = (&'v str, &'v Value)>,
) {
    out.push_str(&format!("{}:{{", entries.len()));
    for (key, value) in entries {
        write_string(out, key);
        write_value(out, value);
    }
    out.push('}');
}

fn write_string(out: &mut String, text: &str) {
    out.push_str(&format!("s:{}:\"{text}\";", text.len()));
}

struct Reader<'a> {
    input: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, reason: &'static str) -> PhpError {
        PhpError {
            at: self.at,
            reason,
        }
    }

    /// One value, with its class when it is an object.
    fn value(&mut self, depth: usize) -> Result<(Option<String>, Value), PhpError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let kind = self.byte()?;
        if kind == b'N' {
            self.expect(b';')?;
            return Ok((None, Value::Null));
        }
        self.expect(b':')?;
        let value = match kind {
            b'b' => match self.until(b';')? {
                b"0" => Value::Bool(false),
                b"1" => Value::Bool(true),
                _ => return Err(self.error("a bool is 0 or 1")),
            },
            b'i' => {
                let digits = self.until(b';')?;
                let text = std::str::from_utf8(digits).map_err(|_| self.error("bad integer"))?;
                Value::Number(
                    text.parse::<i64>()
                        .map_err(|_| self.error("bad integer"))?
                        .into(),
                )
            }
            b'd' => {
                let digits = self.until(b';')?;
                let text = std::str::from_utf8(digits).map_err(|_| self.error("bad float"))?;
                let float: f64 = text.parse().map_err(|_| self.error("bad float"))?;
                Value::Number(
                    Number::from_f64(float).ok_or(self.error("a float that is not finite"))?,
                )
            }
            b's' => {
                let text = self.string()?;
                self.expect(b';')?;
                Value::String(text)
            }
            b'a' => {
                let count = self.count(b'{')?;
                let entries = self.entries(count, depth, None)?;
                self.expect(b'}')?;
                array_or_object(entries)
            }
            b'O' => {
                let class = self.string()?;
                self.expect(b':')?;
                let count = self.count(b'{')?;
                let entries = self.entries(count, depth, Some(&class))?;
                self.expect(b'}')?;
                let object = entries
                    .into_iter()
                    .map(|(k, v)| (k.into_name(), v))
                    .collect();
                return Ok((Some(class), Value::Object(object)));
            }
            _ => return Err(self.error("a kind this reader does not take (C, r, R or unknown)")),
        };
        Ok((None, value))
    }

    /// `count` key-value pairs of an array or of an object of class `class`.
    fn entries(
        &mut self,
        count: usize,
        depth: usize,
        class: Option<&str>,
    ) -> Result<Vec<(Key, Value)>, PhpError> {
        let mut entries = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let key = match self.value(depth + 1)?.1 {
                Value::Number(n) if n.is_i64() => Key::Index(n.as_i64().unwrap_or_default()),
                Value::String(name) => Key::Name(match class {
                    Some(_) => unmangle(&name),
                    None => name,
                }),
                _ => return Err(self.error("a key is an integer or a string")),
            };
            let value = self.value(depth + 1)?.1;
            entries.push((key, value));
        }
        Ok(entries)
    }

    /// `len:"bytes"`, the bytes as UTF-8.
    fn string(&mut self) -> Result<String, PhpError> {
        let len = self.count(b'"')?;
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.input.len());
        let Some(end) = end else {
            return Err(self.error("a string runs past the end"));
        };
        let bytes = &self.input[self.at..end];
        let text =
            std::str::from_utf8(bytes).map_err(|_| self.error("a string that is not UTF-8"))?;
        self.at = end;
        self.expect(b'"')?;
        Ok(text.to_owned())
    }

    /// A decimal count followed by `:` and `open`.
    fn count(&mut self, open: u8) -> Result<usize, PhpError> {
        let digits = self.until(b':')?;
        let count = std::str::from_utf8(digits)
            .ok()
            .and_then(|text| text.parse::<usize>().ok())
            .ok_or(self.error("bad length"))?;
        self.expect(open)?;
        Ok(count)
    }

    /// The bytes up to `end`, which is consumed.
    fn until(&mut self, end: u8) -> Result<&'a [u8], PhpError> {
        let input: &'a [u8] = self.input;
        let start = self.at;
        let Some(len) = input[start..].iter().position(|&b| b == end) else {
            return Err(self.error("unterminated value"));
        };
        self.at = start + len + 1;
        Ok(&input[start..start + len])
    }

    fn byte(&mut self) -> Result<u8, PhpError> {
        let byte = *self
            .input
            .get(self.at)
            .ok_or(self.error("unexpected end"))?;
        self.at += 1;
        Ok(byte)
    }

    fn expect(&mut self, wanted: u8) -> Result<(), PhpError> {
        if self.byte()? == wanted {
            Ok(())
        } else {
            self.at -= 1;
            Err(self.error("unexpected byte"))
        }
    }
}

/// An array's key.
enum Key {
    Index(i64),
    Name(String),
}

impl Key {
    fn into_name(self) -> String {
        match self {
            Key::Index(index) => index.to_string(),
            Key::Name(name) => name,
        }
    }
}

/// A list when the keys are 0, 1, 2, ..., else an object, as `json_encode` decides.
fn array_or_object(entries: Vec<(Key, Value)>) -> Value {
    let is_list = entries
        .iter()
        .enumerate()
        .all(|(i, (key, _))| matches!(key, Key::Index(index) if *index == i as i64));
    if is_list {
        Value::Array(entries.into_iter().map(|(_, value)| value).collect())
    } else {
        Value::Object(
            entries
                .into_iter()
                .map(|(key, value)| (key.into_name(), value))
                .collect::<Map<_, _>>(),
        )
    }
}

/// A property's name without PHP's visibility mangling: `\0*\0name` (protected) and
/// `\0Class\0name` (private) become `name`.
fn unmangle(name: &str) -> String {
    match name
        .strip_prefix('\0')
        .and_then(|rest| rest.split_once('\0'))
    {
        Some((_, name)) => name.to_owned(),
        None => name.to_owned(),
    }
}
