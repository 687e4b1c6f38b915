//! HTTPS for `loops serve --tls-cert FILE --tls-key FILE`: OpenSSL, as the
//! PostgreSQL connections have it, with Mozilla's intermediate settings
//! (TLS 1.2 and 1.3). Each connection's handshake and HTTP/1.1 exchange run
//! in a task of their own, so a slow client holds up no other.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use openssl::ssl::{Ssl, SslAcceptor, SslFiletype, SslMethod};
use tokio::net::TcpListener;
use tokio_openssl::SslStream;

/// The acceptor of the certificate chain in `cert` and the key in `key`
/// (both PEM), checked to belong together.
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<SslAcceptor> {
    let mut builder =
        SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).context("setting up TLS")?;
    builder
        .set_certificate_chain_file(cert)
        .with_context(|| format!("reading the TLS certificate {}", cert.display()))?;
    builder
        .set_private_key_file(key, SslFiletype::PEM)
        .with_context(|| format!("reading the TLS key {}", key.display()))?;
    builder.check_private_key().with_context(|| {
        format!(
            "the TLS key {} does not belong to the certificate {}",
            key.display(),
            cert.display()
        )
    })?;
    Ok(builder.build())
}

/// Serves `router` over TLS on `listener` until `stop` resolves.
pub(super) async fn serve(
    listener: TcpListener,
    acceptor: SslAcceptor,
    router: Router,
    stop: impl Future<Output = ()>,
) {
    let acceptor = Arc::new(acceptor);
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return,
        };
        // A failed accept (a connection reset before it was taken, too
        // many open files) loses that one connection only.
        let Ok((tcp, _)) = accepted else { continue };
        let acceptor = Arc::clone(&acceptor);
        let router = router.clone();
        tokio::spawn(async move {
            let Ok(ssl) = Ssl::new(acceptor.context()) else {
                return;
            };
            let Ok(mut stream) = SslStream::new(ssl, tcp) else {
                return;
            };
            // A client that fails the handshake gets nothing more.
            if Pin::new(&mut stream).accept().await.is_err() {
                return;
            }
            let _ended = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router))
                .await;
        });
    }
}
