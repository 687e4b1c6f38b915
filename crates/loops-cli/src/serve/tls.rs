//! HTTPS for `loops serve --tls-cert FILE --tls-key FILE`: rustls with the
//! ring provider, as the PostgreSQL connections have it (issue 32: no
//! OpenSSL), TLS 1.2 and 1.3 with rustls' safe defaults. Each connection's
//! handshake and HTTP/1.1 exchange run in a task of their own, so a slow
//! client holds up no other.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The acceptor of the certificate chain in `cert` and the key in `key`
/// (both PEM), checked to belong together.
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let reading_cert = || format!("reading the TLS certificate {}", cert.display());
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(reading_cert)?;
    if chain.is_empty() {
        bail!(
            "{}: it holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            reading_cert()
        );
    }
    let private_key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the TLS key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("setting up TLS")?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .with_context(|| {
            format!(
                "the TLS key {} does not belong to the certificate {}",
                key.display(),
                cert.display()
            )
        })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `router` over TLS on `listener` until `stop` resolves.
pub(super) async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    stop: impl Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return,
        };
        // A failed accept (a connection reset before it was taken, too
        // many open files) loses that one connection only.
        let Ok((tcp, _)) = accepted else { continue };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            // A client that fails the handshake gets nothing more.
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let _ended = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router))
                .await;
        });
    }
}
