//! Redis URLs and TLS: the default URL and the one in `REDIS_URL`, the client a URL and a
//! [`QueueConfig`] make, the certificates a TLS connection trusts, and URLs with their
//! passwords hidden for messages.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::error::{Error, Result};
use crate::queue::config::QueueConfig;

/// The URL used when neither code nor `REDIS_URL` names one.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// The Redis URL from `REDIS_URL`, or [`DEFAULT_REDIS_URL`].
pub fn redis_url_from_env() -> String {
    std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_REDIS_URL.to_owned())
}

/// A `redis::Client` for `url` with the TLS settings of `config`: the client a
/// [`RedisQueue`](crate::RedisQueue) uses for one server, for connections of one's own (a blocking wait, a health
/// check).
///
/// `rediss://` URLs connect over TLS (rustls), verifying the server's certificate against
/// [`QueueConfig::tls_ca_file`] when set, else against the system's trusted certificates.
/// The user name and password of the URL are sent with AUTH on every new connection.
pub fn redis_client(url: &str, config: &QueueConfig) -> Result<redis::Client> {
    let invalid_url = |source| Error::InvalidUrl {
        url: redact_url(url),
        source,
    };
    let info = redis::IntoConnectionInfo::into_connection_info(url).map_err(invalid_url)?;
    let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    match tls_certificates(url, config, tls)? {
        None => redis::Client::open(info).map_err(invalid_url),
        Some(certificates) => redis::Client::build_with_tls(info, certificates)
            .map_err(|err| unusable_ca(url, config, err)),
    }
}

/// The certificates a TLS connection for `url` verifies the server against: `None` for the
/// system's trusted ones (or no TLS), else those of [`QueueConfig::tls_ca_file`], checked to be
/// readable PEM certificates. Installs rustls' crypto provider when `tls` is set.
pub(crate) fn tls_certificates(
    url: &str,
    config: &QueueConfig,
    tls: bool,
) -> Result<Option<redis::TlsCertificates>> {
    if tls {
        // rustls needs a process-wide crypto provider; an application may have installed
        // its own already, which is then kept. rustls 0.23.48 deprecates its *ring* provider
        // (*ring* has no post-quantum key exchange) and offers no other way to make one, and a
        // library that names it warns in every build of an application that compiles it from
        // a path. *ring* stays: leaving the choice to rustls's features would panic at the
        // first TLS connection of any application whose build also enables `aws-lc-rs`
        // (rustls's default) without installing a provider.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            #[allow(deprecated)]
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }
    let Some(path) = &config.tls_ca_file else {
        return Ok(None);
    };
    if !tls {
        return Err(Error::InvalidTls {
            url: redact_url(url),
            reason: format!(
                "a CA certificate file ({}) is set, but only a rediss:// URL uses TLS",
                path.display()
            ),
        });
    }
    let root_cert = std::fs::read(path).map_err(|source| Error::TlsCaFile {
        path: path.clone(),
        source,
    })?;
    // redis-rs takes a file without certificates as an empty trust store; say so instead.
    match CertificateDer::pem_slice_iter(&root_cert).collect::<Result<Vec<_>, _>>() {
        Ok(certificates) if !certificates.is_empty() => {}
        Ok(_) => return Err(unusable_ca(url, config, "it holds no PEM certificate")),
        Err(err) => return Err(unusable_ca(url, config, err)),
    }
    Ok(Some(redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(root_cert),
    }))
}

/// The error for a CA certificate file that cannot be used, and why.
pub(crate) fn unusable_ca(
    url: &str,
    config: &QueueConfig,
    reason: impl std::fmt::Display,
) -> Error {
    let path = config
        .tls_ca_file
        .as_deref()
        .unwrap_or(std::path::Path::new(""));
    Error::InvalidTls {
        url: redact_url(url),
        reason: format!(
            "the CA certificate file {} is unusable: {reason}",
            path.display()
        ),
    }
}

/// `url` with the password of its user information, and a Sentinel URL's
/// `sentinel_password` option, replaced by `***`, for messages.
///
/// ```
/// use redjob::queue::redact_url;
/// assert_eq!(redact_url("rediss://app:s3cret@redis:6380/0"), "rediss://app:***@redis:6380/0");
/// assert_eq!(redact_url("redis://:s3cret@redis"), "redis://:***@redis");
/// assert_eq!(redact_url("redis://redis:6379"), "redis://redis:6379");
/// assert_eq!(
///     redact_url("redis+sentinel://s1,s2/mymaster?sentinel_password=s3cret"),
///     "redis+sentinel://s1,s2/mymaster?sentinel_password=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let (url, query) = match url.split_once('?') {
        Some((url, query)) => (url, Some(query)),
        None => (url, None),
    };
    let mut redacted = redact_user_info(url);
    if let Some(query) = query {
        let options: Vec<String> = query
            .split('&')
            .map(|option| match option.split_once('=') {
                Some(("sentinel_password", _)) => "sentinel_password=***".to_owned(),
                _ => option.to_owned(),
            })
            .collect();
        redacted.push('?');
        redacted.push_str(&options.join("&"));
    }
    redacted
}

fn redact_user_info(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|at| at + 3) else {
        return url.to_owned();
    };
    let authority_end = url[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |at| scheme_end + at);
    let Some(at) = url[scheme_end..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let user_info = &url[scheme_end..scheme_end + at];
    let user = user_info.split(':').next().unwrap_or_default();
    format!(
        "{}{user}:***{}",
        &url[..scheme_end],
        &url[scheme_end + at..]
    )
}
