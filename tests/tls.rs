//! Test certificates and a TLS client (issue 32): a CA made with rcgen,
//! server certificates it signs, and a rustls client that trusts only it,
//! for `loops serve --tls-cert` and PostgreSQL's `sslmode`.

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::CertificateDer;

/// A certificate authority of a test's own.
pub struct TestCa {
    cert: rcgen::Certificate,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA whose name is `name`.
    #[expect(clippy::missing_panics_doc, reason = "test setup")]
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("a CA certificate");
        TestCa {
            cert,
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA's certificate (PEM) to `path`.
    #[expect(clippy::missing_panics_doc, reason = "test setup")]
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.pem()).expect("writing the CA certificate");
    }

    /// A server certificate for `names` (host names or IP addresses)
    /// signed by this CA, and its key: both PEM.
    #[expect(clippy::missing_panics_doc, reason = "test setup")]
    pub fn server_cert(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("server parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, &names[0]);
        let key = KeyPair::generate().expect("a server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes a server certificate for `names` and its key into `dir` as
    /// `cert.pem` and `key.pem`; their paths.
    #[expect(clippy::missing_panics_doc, reason = "test setup")]
    pub fn write_server_cert(&self, dir: &Path, names: &[&str]) -> (String, String) {
        let (cert, key) = self.server_cert(names);
        let cert_path = dir.join("cert.pem");
        let key_path = dir.join("key.pem");
        std::fs::write(&cert_path, cert).expect("writing the certificate");
        std::fs::write(&key_path, key).expect("writing the key");
        (
            cert_path.display().to_string(),
            key_path.display().to_string(),
        )
    }

    /// A TLS client configuration that trusts this CA alone.
    #[expect(clippy::missing_panics_doc, reason = "test setup")]
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.cert.der().to_vec()))
            .expect("the CA is a usable root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }
}
