//! A small HTTP/1.1 client for the tests of the workspace's HTTP servers (the worker's
//! Prometheus endpoint, the dashboard): one request per connection, every header as given,
//! so tests can send exactly what a browser or an attacker's page would.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One request to send.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The path and query.
    pub path: &'a str,
    /// Extra headers (`Host` and `Connection: close` are added unless given).
    pub headers: Vec<(&'a str, String)>,
    /// The body, sent with its `Content-Length`.
    pub body: Option<&'a str>,
}

impl<'a> Request<'a> {
    /// A `GET` of `path`.
    pub fn get(path: &'a str) -> Self {
        Request {
            method: "GET",
            path,
            headers: Vec::new(),
            body: None,
        }
    }

    /// A `POST` to `path` with no body.
    pub fn post(path: &'a str) -> Self {
        Request {
            method: "POST",
            ..Request::get(path)
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: &'a str) -> Self {
        self.body = Some(body);
        self
    }

    /// Sends the request to `addr` (`host:port`) and reads the whole response.
    pub fn send(&self, addr: &str) -> std::io::Result<Response> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        if !has("host") {
            head.push_str(&format!("Host: {addr}\r\n"));
        }
        head.push_str("Connection: close\r\n");
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = self.body.unwrap_or("");
        if self.body.is_some() || self.method != "GET" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw)?;
        Response::parse(&raw)
    }
}

/// A response, read to its end.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (chunked encoding undone), as text.
    pub body: String,
}

impl Response {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics when it is not.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|err| {
            panic!(
                "the response ({}) is not JSON ({err}): {}",
                self.status, self.body
            )
        })
    }

    fn parse(raw: &[u8]) -> std::io::Result<Response> {
        let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| invalid("no end of headers"))?;
        let head = String::from_utf8_lossy(&raw[..split]);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| invalid("no status line"))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let mut body = raw[split + 4..].to_vec();
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
        if chunked {
            body = dechunk(&body).ok_or_else(|| invalid("bad chunked body"))?;
        }
        Ok(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// `GET path` from `addr`.
pub fn get(addr: &str, path: &str) -> std::io::Result<Response> {
    Request::get(path).send(addr)
}

/// The value of `series` (a metric name with its labels, as a Prometheus endpoint prints
/// them) in a scrape of `addr`'s `/metrics`; `None` when it cannot be scraped or lacks it.
pub fn scraped(addr: &str, series: &str) -> Option<f64> {
    let body = get(addr, "/metrics").ok()?.body;
    body.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}
