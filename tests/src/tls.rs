//! TLS for a test server: a CA and a server certificate made with `openssl`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The certificate files of a TLS server, made for it by `openssl`.
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    /// The CA certificate clients verify the server against.
    pub(crate) ca_cert: PathBuf,
}

/// Makes a CA and a server certificate for 127.0.0.1 and localhost signed by it, in `dir`,
/// with the `openssl` command; returns them with the server options that serve TLS only, on
/// `port`.
pub(crate) fn make_tls_files(dir: &Path, port: u16) -> (TlsFiles, Vec<String>) {
    let path = |name: &str| dir.join(name).display().to_string();
    let openssl = |args: &[&str]| {
        let output = Command::new(std::env::var("OPENSSL").unwrap_or_else(|_| "openssl".into()))
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|err| {
                panic!("cannot run openssl (install the openssl package): {err}")
            });
        assert!(
            output.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"],
            &ec[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=jobs test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"],
            &ec[..],
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("cannot write the certificate extensions");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    let args = vec![
        "--port".to_owned(),
        "0".to_owned(),
        "--tls-port".to_owned(),
        port.to_string(),
        "--tls-cert-file".to_owned(),
        path("server.crt"),
        "--tls-key-file".to_owned(),
        path("server.key"),
        "--tls-ca-cert-file".to_owned(),
        path("ca.crt"),
        "--tls-auth-clients".to_owned(),
        "no".to_owned(),
    ];
    (
        TlsFiles {
            ca_cert: dir.join("ca.crt"),
        },
        args,
    )
}
