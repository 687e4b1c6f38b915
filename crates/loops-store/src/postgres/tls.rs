//! TLS for PostgreSQL connections: rustls with the ring provider (issue
//! 32), so no command links OpenSSL. A connection string's `sslmode` and
//! `sslrootcert` keep libpq's meaning:
//!
//! | `sslmode`            | TLS                        | the server's certificate                |
//! |----------------------|----------------------------|-----------------------------------------|
//! | `disable`            | never                      | —                                       |
//! | `prefer` (default)   | when the server offers it  | unchecked; with `sslrootcert=`, its chain |
//! | `require`            | always                     | unchecked; with `sslrootcert=`, its chain |
//! | `verify-ca`          | always                     | its chain                               |
//! | `verify-full`        | always                     | its chain and the host name             |
//!
//! A chain is checked against the certificates of the `sslrootcert=` file
//! (PEM), or without one (or with `sslrootcert=system`) against the
//! system's trusted roots, as OpenSSL's default paths had it before. The
//! driver knows neither `verify-*` nor `sslrootcert`, so both keys are
//! taken out of the string before it parses it, and applied here.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::connect::take_keys;
use crate::error::OpenError;

/// The keys taken out of a connection string (see the module's doc).
const KEYS: [&str; 2] = ["sslmode", "sslrootcert"];

/// A connection string's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, OpenError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(OpenError::BadDatabaseUrl {
                    reason: format!(
                        "sslmode={other:?} is not one of disable, prefer, require, verify-ca, \
                         verify-full"
                    ),
                });
            }
        })
    }

    /// The driver's mode: whether TLS is tried, and whether it must be had.
    pub(super) fn driver(self) -> postgres::config::SslMode {
        match self {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                postgres::config::SslMode::Require
            }
        }
    }
}

/// What of the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Nothing: the connection is encrypted, not authenticated.
    Nothing,
    /// Its chain up to a trusted root, not the host name.
    Chain,
    /// Its chain and the host name.
    Full,
}

/// The TLS settings of a connection string.
#[derive(Clone, Debug)]
pub(super) struct TlsSettings {
    pub(super) mode: SslMode,
    /// The `sslrootcert=` value: a PEM file, or `system`.
    root_cert: Option<String>,
}

impl TlsSettings {
    /// Takes `sslmode` and `sslrootcert` out of `url` (a URL's query
    /// parameters or `key=value` pairs): the rest of the string, for the
    /// driver, and the settings. The last of a repeated key wins, as in
    /// libpq.
    pub(super) fn split(url: &str) -> Result<(Cow<'_, str>, TlsSettings), OpenError> {
        let (rest, taken) = take_keys(url, &KEYS);
        let mut settings = TlsSettings {
            mode: SslMode::Prefer,
            root_cert: None,
        };
        for (key, value) in taken {
            match key {
                "sslmode" => settings.mode = SslMode::parse(&value)?,
                _ => settings.root_cert = Some(value).filter(|v| !v.is_empty()),
            }
        }
        Ok((rest, settings))
    }

    fn check(&self) -> Check {
        match self.mode {
            SslMode::VerifyFull => Check::Full,
            SslMode::VerifyCa => Check::Chain,
            _ if self.root_cert.is_some() => Check::Chain,
            _ => Check::Nothing,
        }
    }

    /// Where the trusted roots come from, for messages.
    fn roots_shown(&self) -> String {
        match self.root_cert.as_deref() {
            Some(path) if path != "system" => format!("sslrootcert={path}"),
            _ => "the system's trusted roots".to_owned(),
        }
    }

    /// The client configuration these settings ask for: the trusted roots
    /// are read now, so a changed file counts from the next connection.
    pub(super) fn client_config(&self) -> Result<ClientConfig, OpenError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_setup(e.to_string()))?;
        let verifier: Arc<dyn ServerCertVerifier> = match self.check() {
            Check::Nothing => Arc::new(Unchecked {
                provider,
                roots: None,
            }),
            Check::Chain => Arc::new(Unchecked {
                provider,
                roots: Some(Arc::new(self.roots()?)),
            }),
            Check::Full => {
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider)
                    .build()
                    .map_err(|e| tls_setup(e.to_string()))?
            }
        };
        Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth())
    }

    /// The trusted roots: the `sslrootcert=` file's certificates, or the
    /// system's.
    fn roots(&self) -> Result<RootCertStore, OpenError> {
        let mut roots = RootCertStore::empty();
        match self.root_cert.as_deref() {
            Some(path) if path != "system" => {
                let read = |e: rustls::pki_types::pem::Error| {
                    tls_setup(format!(
                        "cannot read the root certificates sslrootcert={path}: {e}"
                    ))
                };
                for cert in CertificateDer::pem_file_iter(path).map_err(read)? {
                    roots.add(cert.map_err(read)?).map_err(|e| {
                        tls_setup(format!(
                            "a certificate of sslrootcert={path} is unusable: {e}"
                        ))
                    })?;
                }
                if roots.is_empty() {
                    return Err(tls_setup(format!(
                        "sslrootcert={path} holds no PEM certificate"
                    )));
                }
            }
            _ => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    let why = found
                        .errors
                        .first()
                        .map_or_else(String::new, |e| format!(": {e}"));
                    return Err(tls_setup(format!(
                        "found none of the system's trusted root certificates{why}; name a CA \
                         file with sslrootcert="
                    )));
                }
            }
        }
        Ok(roots)
    }

    /// The error of a failed connection: a refused certificate or TLS
    /// handshake says so, naming the cause and the fix; anything else is
    /// the driver's error.
    pub(super) fn connect_error(&self, error: postgres::Error) -> OpenError {
        let refused = std::error::Error::source(&error)
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .and_then(std::io::Error::get_ref)
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        let Some(refused) = refused else {
            return OpenError::db("connecting to PostgreSQL")(error);
        };
        let (reason, fix) = match refused {
            rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected,
                presented,
            }) => (
                format!(
                    "its certificate does not name the host {} (it names {})",
                    expected.to_str(),
                    match presented.as_slice() {
                        [] => "no host".to_owned(),
                        names => names.join(", "),
                    }
                ),
                "connect with a host name the certificate names, or use sslmode=verify-ca to \
                 check its chain only",
            ),
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => (
                "its certificate does not name the host the URL connects to".to_owned(),
                "connect with a host name the certificate names, or use sslmode=verify-ca to \
                 check its chain only",
            ),
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => (
                format!(
                    "its certificate is not signed by a CA of {}",
                    self.roots_shown()
                ),
                "point sslrootcert= at the CA file that signed the server's certificate",
            ),
            rustls::Error::InvalidCertificate(other) => (
                format!("its certificate is refused ({})", Shown(other)),
                "renew the server's certificate, or check sslrootcert=",
            ),
            other => (
                format!("the TLS handshake failed ({other})"),
                "check the server's TLS setup, or use sslmode=disable where TLS is not needed",
            ),
        };
        OpenError::TlsRefused { reason, fix }
    }
}

/// A certificate error as words rather than a variant's name.
struct Shown<'a>(&'a CertificateError);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                f.write_str("it has expired")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                f.write_str("it is not valid yet")
            }
            CertificateError::Revoked => f.write_str("it is revoked"),
            CertificateError::BadSignature => f.write_str("its signature is bad"),
            CertificateError::BadEncoding => f.write_str("it is not a valid certificate"),
            other => write!(f, "{other:?}"),
        }
    }
}

fn tls_setup(reason: String) -> OpenError {
    OpenError::Tls { reason }
}

/// The verifier of `prefer`, `require` and `verify-ca`: the handshake's
/// signatures are checked, and with `roots` the certificate's chain, but
/// never the host name.
#[derive(Debug)]
struct Unchecked {
    provider: Arc<CryptoProvider>,
    roots: Option<Arc<RootCertStore>>,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> (String, SslMode, Option<String>) {
        let (rest, settings) = TlsSettings::split(url).unwrap();
        (rest.into_owned(), settings.mode, settings.root_cert)
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_both_forms() {
        assert_eq!(
            split(
                "postgresql://u:p%3Fw@h/db?sslmode=verify-full&sslrootcert=%2Fca%20dir%2Fca.pem&user=x"
            ),
            (
                "postgresql://u:p%3Fw@h/db?user=x".to_owned(),
                SslMode::VerifyFull,
                Some("/ca dir/ca.pem".to_owned())
            )
        );
        assert_eq!(
            split("postgres://h/db?sslmode=require"),
            ("postgres://h/db".to_owned(), SslMode::Require, None)
        );
        assert_eq!(
            split("host=h sslrootcert='/a b/c\\'s.pem' sslmode = verify-ca dbname=x"),
            (
                "host=h   dbname=x".to_owned(),
                SslMode::VerifyCa,
                Some("/a b/c's.pem".to_owned())
            )
        );
        assert_eq!(
            split("host=/tmp dbname=x"),
            ("host=/tmp dbname=x".to_owned(), SslMode::Prefer, None)
        );
        let err = TlsSettings::split("host=h sslmode=allow").unwrap_err();
        assert!(err.to_string().contains("verify-full"), "{err}");
    }

    /// The server of `cargo xtask postgres` serves TLS on 127.0.0.1 with
    /// a certificate for `localhost` (issue 32): each mode but `disable`
    /// negotiates it, as `pg_stat_ssl` on the server says.
    #[test]
    fn every_mode_but_disable_negotiates_tls_with_the_test_server() {
        let Some(db) = crate::testing::fresh_database("postgres::tls::every_mode_but_disable")
        else {
            return;
        };
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (Some(port), Some(ca)) = (
            var("LOOPS_TEST_DATABASE_TLS_PORT"),
            var("LOOPS_TEST_DATABASE_TLS_CA"),
        ) else {
            eprintln!(
                "skipped postgres::tls::every_mode_but_disable: no PostgreSQL TLS server \
                 (LOOPS_TEST_DATABASE_TLS_PORT and LOOPS_TEST_DATABASE_TLS_CA are not set)"
            );
            return;
        };
        for (query, tls) in [
            ("sslmode=disable".to_owned(), false),
            (String::new(), true),
            ("sslmode=require".to_owned(), true),
            (format!("sslmode=verify-ca&sslrootcert={ca}"), true),
            (format!("sslmode=verify-full&sslrootcert={ca}"), true),
        ] {
            let url = format!(
                "postgresql://postgres@localhost:{port}/{}?{query}",
                db.name()
            );
            let url = super::super::connect::DatabaseUrl::parse(&url).unwrap();
            let connector = super::super::connect::Connector::new(&url, "test").unwrap();
            let mut client = connector.connect().unwrap();
            let row = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .unwrap();
            assert_eq!(row.get::<_, bool>(0), tls, "{query}");
        }
    }

    #[test]
    fn each_mode_checks_what_libpq_checks() {
        let check = |url: &str| TlsSettings::split(url).unwrap().1.check();
        assert_eq!(check("host=h"), Check::Nothing);
        assert_eq!(check("host=h sslmode=require"), Check::Nothing);
        assert_eq!(
            check("host=h sslmode=require sslrootcert=/ca"),
            Check::Chain
        );
        assert_eq!(check("host=h sslmode=verify-ca"), Check::Chain);
        assert_eq!(check("host=h sslmode=verify-full"), Check::Full);
    }
}
