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
//! [`start`] runs the server on a thread of its own, with its own async
//! runtime (tokio, current-thread), built only here as for `loops mcp`:
//! `loops serve` starts it and waits for a signal, `loops daemon run
//! --serve` starts it beside the scheduler and stops it when the scheduler
//! stops.

mod create;
mod edit;
mod follow;
mod guard;
mod openapi;
mod pages;
mod paging;
mod routes;
mod sse;
mod tls;
mod token;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::sync::watch;

use crate::args::daemon::DaemonServeFlags;
use crate::args::serve::{DEFAULT_LISTEN, ServeArgs};
use crate::context::Context;
use crate::exit::Outcome;

/// How long requests still open when the server stops (a follower of a
/// run's output) may take to finish before they are cut.
const DRAIN: Duration = Duration::from_secs(2);

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

/// Where and how to serve: the flags of `loops serve`, or of
/// `loops daemon run --serve`.
pub(crate) struct Options<'a> {
    /// The flag that gave the address, for messages (`--listen`,
    /// `--serve`).
    pub(crate) flag: &'static str,
    /// The address and port, as given.
    pub(crate) listen: &'a str,
    /// `--tls-cert`, PEM.
    pub(crate) tls_cert: Option<&'a Path>,
    /// `--tls-key`, PEM.
    pub(crate) tls_key: Option<&'a Path>,
}

impl Options<'_> {
    /// The address to bind, refused when the server could not make it safe
    /// (`resolve::listen`).
    pub(crate) fn address(&self) -> Result<SocketAddr> {
        crate::resolve::listen::address(self.flag, self.listen, self.tls_cert.is_some())
    }
}

/// A server running on a thread of its own, with its own runtime; stopped
/// by [`Server::stop`] or when dropped.
pub(crate) struct Server {
    /// Set to `true` to stop it.
    stop: watch::Sender<bool>,
    /// The thread serving, which returns how serving ended.
    thread: Option<JoinHandle<Result<()>>>,
}

impl Server {
    /// Stops serving: no new connection is taken, and requests still open
    /// get [`DRAIN`] to finish. Returns once the port is closed.
    pub(crate) fn stop(mut self) -> Result<()> {
        self.stop.send_replace(true);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(served)) => served,
            Some(Err(_)) => bail!("the HTTP server's thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Starts serving the store of `ctx` as `opts` say, on a thread of its
/// own; `say` gets the address and the login URL, the one place the token
/// is shown. Bad flags, a bad data directory and a taken port are errors
/// here, before anything serves.
pub(crate) fn start(
    ctx: &Context,
    opts: &Options<'_>,
    say: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<Server> {
    let wanted = opts.address()?;
    let tls = match (opts.tls_cert, opts.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the server's runtime")?;
    let scheme = shared.scheme;
    say(&format!("loops serve: listening on {scheme}://{bound}"))?;
    say(&format!(
        "loops serve: log in at {scheme}://{bound}/login?token={}",
        shared.token
    ))?;
    let (stop, stopped) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name("loops-serve".to_owned())
        .spawn(move || serve_on(runtime, listener, tls, shared, stopped))
        .context("starting the server's thread")?;
    Ok(Server {
        stop,
        thread: Some(thread),
    })
}

/// Serves on `listener` until `stop` turns `true` (or its sender goes).
fn serve_on(
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let router = routes::router(shared);
        let until = stopped(stop.clone());
        let serving = async move {
            match tls {
                Some(acceptor) => {
                    tls::serve(listener, acceptor, router, until).await;
                    Ok(())
                }
                None => {
                    axum::serve(listener, router)
                        .with_graceful_shutdown(until)
                        .await
                }
            }
        };
        tokio::select! {
            served = serving => served,
            () = async {
                stopped(stop).await;
                tokio::time::sleep(DRAIN).await;
            } => Ok(()),
        }
    });
    // A request still running on a blocking thread is not waited for.
    runtime.shutdown_background();
    served.context("serving HTTP")
}

/// Resolves once `stop` turns `true`, or its sender is dropped.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _changed = stop.wait_for(|stop| *stop).await;
}

/// `loops daemon run --serve`: starts the server as `flags` say, `say`
/// writing to the daemon's log; the returned function stops it (see
/// `context::StartServer`).
pub(crate) fn in_daemon(
    ctx: &Context,
    flags: &DaemonServeFlags,
    say: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<Box<dyn FnOnce() -> Result<()> + Send>> {
    let listen = flags.serve.as_deref().unwrap_or(DEFAULT_LISTEN);
    let opts = Options {
        flag: "--serve",
        listen,
        tls_cert: flags.tls_cert.as_deref(),
        tls_key: flags.tls_key.as_deref(),
    };
    let server = start(ctx, &opts, say)?;
    Ok(Box::new(move || server.stop()))
}

/// `loops serve`: serves until SIGINT or SIGTERM.
pub(crate) fn run(ctx: &Context, args: &ServeArgs) -> Result<Outcome> {
    let opts = Options {
        flag: "--listen",
        listen: &args.listen,
        tls_cert: args.tls_cert.as_deref(),
        tls_key: args.tls_key.as_deref(),
    };
    // Not through `ctx.note`: `--quiet` must not hide the way in.
    let mut say = |line: &str| -> Result<()> {
        use std::io::Write;
        writeln!(std::io::stderr().lock(), "{line}")?;
        Ok(())
    };
    let signals =
        loops_exec::SignalCancel::install().context("installing the SIGINT/SIGTERM handlers")?;
    let server = start(ctx, &opts, &mut say)?;
    // The wait returns at once on a signal; the hour only bounds one wait.
    while !signals.token().wait_timeout(Duration::from_secs(3600)) {}
    server.stop()?;
    drop(signals);
    Ok(Outcome::Success)
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
