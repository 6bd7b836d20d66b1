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
        // its own already, which is then kept.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = ring_provider().install_default();
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

/// rustls's *ring* provider, the one a TLS handle installs when the application installed
/// none. rustls 0.23.48 deprecates its `crypto::ring::default_provider()` (*ring* has no
/// post-quantum key exchange) and offers no other way to make one: a library that names the
/// deprecated function warns in every build of an application that compiles it. So it is
/// assembled here from the same parts: rustls's *ring* cipher suites and key exchange
/// groups, webpki's *ring* signature algorithms as rustls maps them, and *ring*'s random
/// numbers and key loading. Leaving the choice to rustls's crate features instead would
/// panic at the first TLS connection of any application whose build also enables
/// `aws-lc-rs` (rustls's default) without installing a provider.
fn ring_provider() -> rustls::crypto::CryptoProvider {
    use rustls::crypto::ring::{DEFAULT_CIPHER_SUITES, DEFAULT_KX_GROUPS};
    use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
    use rustls::SignatureScheme;
    use webpki::ring as alg;

    /// The algorithms a certificate chain or a handshake signature is verified with, and the
    /// TLS signature schemes they serve, as rustls's *ring* provider lists them.
    static SIGNATURE_ALGORITHMS: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
        all: &[
            alg::ECDSA_P256_SHA256,
            alg::ECDSA_P256_SHA384,
            alg::ECDSA_P384_SHA256,
            alg::ECDSA_P384_SHA384,
            alg::ED25519,
            alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
            alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
            alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
            alg::RSA_PKCS1_2048_8192_SHA256,
            alg::RSA_PKCS1_2048_8192_SHA384,
            alg::RSA_PKCS1_2048_8192_SHA512,
            alg::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
            alg::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
            alg::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
        ],
        mapping: &[
            // For TLS 1.2 a scheme does not fix the curve; for TLS 1.3 it does.
            (
                SignatureScheme::ECDSA_NISTP384_SHA384,
                &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384],
            ),
            (
                SignatureScheme::ECDSA_NISTP256_SHA256,
                &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256],
            ),
            (SignatureScheme::ED25519, &[alg::ED25519]),
            (
                SignatureScheme::RSA_PSS_SHA512,
                &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
            ),
            (
                SignatureScheme::RSA_PSS_SHA384,
                &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
            ),
            (
                SignatureScheme::RSA_PSS_SHA256,
                &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
            ),
            (
                SignatureScheme::RSA_PKCS1_SHA512,
                &[alg::RSA_PKCS1_2048_8192_SHA512],
            ),
            (
                SignatureScheme::RSA_PKCS1_SHA384,
                &[alg::RSA_PKCS1_2048_8192_SHA384],
            ),
            (
                SignatureScheme::RSA_PKCS1_SHA256,
                &[alg::RSA_PKCS1_2048_8192_SHA256],
            ),
        ],
    };

    CryptoProvider {
        cipher_suites: DEFAULT_CIPHER_SUITES.to_vec(),
        kx_groups: DEFAULT_KX_GROUPS.to_vec(),
        signature_verification_algorithms: SIGNATURE_ALGORITHMS,
        secure_random: &Ring,
        key_provider: &Ring,
    }
}

/// *ring*'s random numbers and key loading, for [`ring_provider`]. The provider becomes the
/// process's default, which an application may also serve TLS with, so it loads keys as
/// rustls's own does.
#[derive(Debug)]
struct Ring;

impl rustls::crypto::SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> std::result::Result<(), rustls::crypto::GetRandomFailed> {
        use ring::rand::SecureRandom;
        ring::rand::SystemRandom::new()
            .fill(buf)
            .map_err(|_| rustls::crypto::GetRandomFailed)
    }
}

impl rustls::crypto::KeyProvider for Ring {
    fn load_private_key(
        &self,
        key_der: rustls::pki_types::PrivateKeyDer<'static>,
    ) -> std::result::Result<std::sync::Arc<dyn rustls::sign::SigningKey>, rustls::Error> {
        // The key's bytes are wiped once it is parsed, as rustls's own provider does.
        rustls::crypto::ring::sign::any_supported_type(&zeroize::Zeroizing::new(key_der))
    }
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

/// `url` with the password of its user information replaced by `***`, for messages.
///
/// ```
/// use redjob::queue::redact_url;
/// assert_eq!(redact_url("rediss://app:s3cret@redis:6380/0"), "rediss://app:***@redis:6380/0");
/// assert_eq!(redact_url("redis://:s3cret@redis"), "redis://:***@redis");
/// assert_eq!(redact_url("redis://redis:6379"), "redis://redis:6379");
/// ```
pub fn redact_url(url: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The provider assembled here is rustls's own *ring* provider, part for part: a rustls
    /// release that changes its provider fails this, rather than leave the copy behind.
    #[test]
    #[allow(deprecated)]
    fn the_ring_provider_is_rustls_own() {
        let ours = ring_provider();
        let theirs = rustls::crypto::ring::default_provider();
        let suites = |p: &rustls::crypto::CryptoProvider| -> Vec<_> {
            p.cipher_suites.iter().map(|s| s.suite()).collect()
        };
        let groups = |p: &rustls::crypto::CryptoProvider| -> Vec<_> {
            p.kx_groups.iter().map(|g| g.name()).collect()
        };
        let algorithms = |p: &rustls::crypto::CryptoProvider| {
            let verify = &p.signature_verification_algorithms;
            let mapping: Vec<String> = verify
                .mapping
                .iter()
                .map(|(scheme, algs)| format!("{scheme:?} {algs:?}"))
                .collect();
            (format!("{:?}", verify.all), mapping)
        };
        assert_eq!(suites(&ours), suites(&theirs));
        assert_eq!(groups(&ours), groups(&theirs));
        assert_eq!(algorithms(&ours), algorithms(&theirs));
        let mut random = [0u8; 32];
        rustls::crypto::SecureRandom::fill(ours.secure_random, &mut random).unwrap();
        assert_ne!(random, [0u8; 32]);
    }
}
