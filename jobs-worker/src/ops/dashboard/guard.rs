//! What every dashboard request goes through: the `Host` check, basic auth (full, or read-only:
//! pages and reads, no change), the cross-site check on state-changing requests, and headers
//! that keep the page out of other sites' frames.
//!
//! A POST is accepted only with the header `X-Requested-With: jobs-dashboard`, which an HTML
//! form cannot send and a script of another origin cannot send without a CORS preflight that
//! the dashboard never grants. A request whose `Origin` is not the dashboard's own, or whose
//! `Sec-Fetch-Site` says it comes from another site, is refused as well.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use std::net::IpAddr;
use std::sync::Arc;

use crate::ops::dashboard::error::DashboardError;

/// The header, and its value, that every state-changing request must carry.
pub const REQUESTED_WITH: (&str, &str) = ("x-requested-with", "jobs-dashboard");

/// The checks, as configured.
#[derive(Debug)]
pub struct Guard {
    /// The whole `Authorization` header value of full access.
    authorization: Option<String>,
    /// The whole `Authorization` header value of read-only access.
    read_only: Option<String>,
    /// Whether the `Host` must be a loopback name.
    loopback: bool,
}

impl Guard {
    /// Checks for `credentials` (`user:password`, when given), and for a loopback `Host` when
    /// `loopback`.
    pub fn new(credentials: Option<&str>, loopback: bool) -> Result<Guard, DashboardError> {
        Ok(Guard {
            authorization: credentials
                .map(|credentials| basic_authorization(credentials, "--auth"))
                .transpose()?,
            read_only: None,
            loopback,
        })
    }

    /// This guard, also letting `credentials` (`user:password`) in to read: pages and `GET`
    /// endpoints, and no change (`403`).
    pub fn read_only(mut self, credentials: &str) -> Result<Guard, DashboardError> {
        self.read_only = Some(basic_authorization(credentials, "--read-only-auth")?);
        Ok(self)
    }

    /// What the request's `Authorization` header lets it do; `None`: nothing (`401`).
    fn access(&self, headers: &HeaderMap) -> Option<Access> {
        if self.authorization.is_none() && self.read_only.is_none() {
            return Some(Access::Full);
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        let matches = |expected: &Option<String>| {
            expected
                .as_ref()
                .is_some_and(|expected| same_bytes(given, expected.as_bytes()))
        };
        if matches(&self.authorization) {
            Some(Access::Full)
        } else if matches(&self.read_only) {
            Some(Access::ReadOnly)
        } else {
            None
        }
    }
}

/// What an authenticated request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Read and change.
    Full,
    /// Read only.
    ReadOnly,
}

/// The `Authorization` header value of basic auth with `credentials` (`user:password`), given
/// by the option `flag`.
fn basic_authorization(credentials: &str, flag: &'static str) -> Result<String, DashboardError> {
    match credentials.split_once(':') {
        Some((user, password)) if !user.is_empty() && !password.is_empty() => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
            Ok(format!("Basic {encoded}"))
        }
        _ => Err(DashboardError::InvalidAuth(flag)),
    }
}

/// The middleware: refuses what the [`Guard`] forbids, and adds the security headers.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if guard.loopback && !host_is_loopback(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "the dashboard listens on loopback and answers only loopback host names",
        );
    }
    let Some(access) = guard.access(headers) else {
        let mut response = refuse(StatusCode::UNAUTHORIZED, "authentication required");
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"jobsctl dashboard\", charset=\"UTF-8\""),
        );
        return response;
    };
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    if !safe {
        if access == Access::ReadOnly {
            return refuse(
                StatusCode::FORBIDDEN,
                "read-only access: a change needs the --auth credentials",
            );
        }
        if let Some(reason) = cross_site(headers) {
            return refuse(StatusCode::FORBIDDEN, reason);
        }
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
        (
            "content-security-policy",
            "default-src 'self'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Why a state-changing request may come from another site, if it may.
fn cross_site(headers: &HeaderMap) -> Option<&'static str> {
    let (name, value) = REQUESTED_WITH;
    if headers.get(name).and_then(|v| v.to_str().ok()) != Some(value) {
        return Some("refused: a change needs the header X-Requested-With: jobs-dashboard");
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        if !matches!(site.to_str(), Ok("same-origin" | "none")) {
            return Some("refused: cross-site request");
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let own = host.is_some_and(|host| {
            let origin = origin.to_str().unwrap_or_default();
            origin == format!("http://{host}") || origin == format!("https://{host}")
        });
        if !own {
            return Some("refused: cross-origin request");
        }
    }
    None
}

/// Whether the `Host` header names this machine: `localhost` or a loopback address.
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compares in time that does not depend on where the inputs differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

fn refuse(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost:9900",
            "127.0.0.1:9900",
            "127.0.0.1",
            "[::1]:9900",
        ] {
            assert!(host_is_loopback(&headers(&[("host", host)])), "{host}");
        }
        for host in [
            "evil.example:9900",
            "10.0.0.1:9900",
            "localhost.evil.example",
        ] {
            assert!(!host_is_loopback(&headers(&[("host", host)])), "{host}");
        }
    }

    #[test]
    fn cross_site_requests() {
        let own = [("host", "127.0.0.1:9900"), REQUESTED_WITH];
        assert_eq!(cross_site(&headers(&own)), None);
        let same_origin = [own[0], own[1], ("origin", "http://127.0.0.1:9900")];
        assert_eq!(cross_site(&headers(&same_origin)), None);
        let foreign = [own[0], own[1], ("origin", "http://evil.example")];
        assert!(cross_site(&headers(&foreign)).is_some());
        let fetched = [own[0], own[1], ("sec-fetch-site", "cross-site")];
        assert!(cross_site(&headers(&fetched)).is_some());
        assert!(cross_site(&headers(&own[..1])).is_some());
    }

    #[test]
    fn credentials_need_a_user_and_a_password() {
        assert!(Guard::new(Some("admin:secret"), true).is_ok());
        for bad in ["admin", ":secret", "admin:"] {
            assert!(Guard::new(Some(bad), true).is_err(), "{bad}");
        }
    }
}
