//! `loops serve` (issue 29): the JSON API over HTTP, on the same store as
//! the command line (SQLite or PostgreSQL, through the same [`Context`]).
//!
//! Every route is a CLI command: its path and query become that command's
//! typed request directly, the request runs through the same code as on
//! the command line (`app::run_request_classified`) on a blocking thread
//! (the store is synchronous), and the document is what `--json` prints.
//! An error is `{"error": {"code", "message"}}` with the command line's
//! message, and an HTTP status from what kind of error it was (`fault`).
//!
//! The server holds the owner's power, so (`guard`):
//! - it binds loopback by default; a non-loopback `--listen` needs
//!   `--tls-cert` and `--tls-key` (`tls`), and one address, since the
//!   `Host` check needs the one clients use;
//! - every API call needs the access token (`token`), as the cookie that
//!   the printed login URL sets, or as `Authorization: Bearer`;
//! - a write whose `Origin` is not this server's is refused, and so is any
//!   request whose `Host` does not name this server (DNS rebinding);
//! - every response carries a CSP without inline script, `nosniff` and
//!   a `same-origin` referrer policy.
//!
//! The async runtime (tokio, current-thread) is built only here, as for
//! `loops mcp`.

mod create;
mod guard;
mod openapi;
mod pages;
mod routes;
mod sse;
mod tls;
mod token;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};

use crate::args::serve::ServeArgs;
use crate::context::Context;
use crate::exit::Outcome;

/// What every handler shares: the settings commands run with, the token,
/// and the names this server answers to.
pub(crate) struct Shared {
    /// The context each request runs in (`Context::for_call`).
    ctx: Arc<Context>,
    /// The access token, as hex.
    token: String,
    /// The `Host` values accepted: the bound address, and for a loopback
    /// bind `localhost:<port>`.
    hosts: Vec<String>,
    /// `https` with TLS, else `http`.
    scheme: &'static str,
    /// The change feed of `/api/v1/events`.
    hub: sse::Hub,
}

/// `loops serve`: serves until SIGINT or SIGTERM.
pub(crate) fn run(ctx: &Context, args: &ServeArgs) -> Result<Outcome> {
    let wanted: SocketAddr = args.listen.trim().parse().map_err(|_| {
        anyhow::anyhow!(
            "--listen must be an address and port such as 127.0.0.1:8470 or [::1]:8470, not {:?}",
            args.listen
        )
    })?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    check_bind(wanted, tls.is_some())?;
    // Opening the store first reports a bad data directory or database URL
    // at once, and makes the data directory the token lives in.
    drop(ctx.open_store()?);
    let token = token::load_or_create(&ctx.data_dir()?)?;
    let listener = TcpListener::bind(wanted).with_context(|| format!("listening on {wanted}"))?;
    let bound = listener.local_addr().context("reading the bound address")?;
    listener
        .set_nonblocking(true)
        .context("making the listening socket non-blocking")?;
    let shared = Arc::new(Shared {
        ctx: Arc::new(ctx.for_call()),
        token,
        hosts: hosts(bound),
        scheme: if tls.is_some() { "https" } else { "http" },
        hub: sse::Hub::default(),
    });
    {
        // Not through `ctx.note`: `--quiet` must not hide the way in. The
        // token is printed here and nowhere else.
        let mut err = std::io::stderr().lock();
        let scheme = shared.scheme;
        writeln!(err, "loops serve: listening on {scheme}://{bound}")?;
        writeln!(
            err,
            "loops serve: log in at {scheme}://{bound}/login?token={}",
            shared.token
        )?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the server's runtime")?;
    let signals =
        loops_exec::SignalCancel::install().context("installing the SIGINT/SIGTERM handlers")?;
    let stop = Arc::new(tokio::sync::Notify::new());
    let _subscription = {
        let stop = Arc::clone(&stop);
        signals.token().subscribe(move || stop.notify_one())
    };
    if signals.token().is_cancelled() {
        return Ok(Outcome::Success);
    }
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let router = routes::router(shared);
        match tls {
            Some(acceptor) => {
                tls::serve(listener, acceptor, router, stop).await;
                Ok(())
            }
            None => {
                axum::serve(listener, router)
                    .with_graceful_shutdown(async move { stop.notified().await })
                    .await
            }
        }
    });
    // A request still running on a blocking thread is not waited for.
    runtime.shutdown_background();
    drop(signals);
    served.context("serving HTTP")?;
    Ok(Outcome::Success)
}

/// Refuses a bind the server cannot make safe: anything but loopback needs
/// TLS, and one address, which the `Host` check compares with.
fn check_bind(addr: SocketAddr, tls: bool) -> Result<()> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !tls {
        bail!(
            "--listen {addr} is not a loopback address: serving the API beyond this machine needs \
             TLS; give --tls-cert and --tls-key, or listen on 127.0.0.1 (the default)"
        );
    }
    if addr.ip().is_unspecified() {
        bail!(
            "--listen {addr} is every address of this machine, but requests must name the one \
             they came to (against DNS rebinding): give that address, such as 192.0.2.10:{}",
            addr.port()
        );
    }
    Ok(())
}

/// The `Host` values that name this server at `bound`.
fn hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts = vec![bound.to_string()];
    if bound.ip().is_loopback() {
        hosts.push(format!("localhost:{}", bound.port()));
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_binds_are_served() {
        assert!(check_bind("127.0.0.1:0".parse().unwrap(), false).is_ok());
        assert!(check_bind("[::1]:8470".parse().unwrap(), false).is_ok());
        let err = check_bind("192.0.2.1:8470".parse().unwrap(), false).unwrap_err();
        assert!(err.to_string().contains("--tls-cert"), "{err}");
        assert!(check_bind("192.0.2.1:8470".parse().unwrap(), true).is_ok());
        let err = check_bind("0.0.0.0:8470".parse().unwrap(), true).unwrap_err();
        assert!(err.to_string().contains("every address"), "{err}");
    }

    #[test]
    fn a_loopback_server_answers_to_localhost_too() {
        assert_eq!(
            hosts("127.0.0.1:9000".parse().unwrap()),
            ["127.0.0.1:9000", "localhost:9000"]
        );
        assert_eq!(
            hosts("[::1]:80".parse().unwrap()),
            ["[::1]:80", "localhost:80"]
        );
    }
}
