//! Server-sent events (issue 29): a run's output as it is written
//! (`/api/v1/runs/{id}/output?follow=1&showOutput=1`) and the store's
//! change feed (`/api/v1/events`), which the pages' script listens to.
//!
//! - **Output** is followed as `loops logs -f` follows it, by the same
//!   [`Tail`]: a thread per follower polls the run's log file and status
//!   every [`logs::POLL`], sends each batch of complete lines as an
//!   `output` event (control characters escaped, as on a terminal), and
//!   ends with an `end` event holding the run's `--json` object (output
//!   redacted). A run without a log on this host (another host's, a
//!   workflow's) sends its stored output once it ends. The thread ends
//!   when the run has, or when the client has gone.
//! - **Changes** come from one [`Watch`] per server, whatever the number
//!   of listeners: its thread looks every 100 ms and sends a `change`
//!   event to every listener when the store changed, and a `tick` event
//!   when nothing did for a few seconds (relative times moved on).
//!
//! Both streams start with a `ready` event and carry keep-alive comments,
//! so a proxy does not close an idle stream.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use loops_core::{LoopRun, RunStatus};
use tokio::sync::{broadcast, mpsc};

use super::Shared;
use super::routes::error;
use crate::commands::logs::{self, Lines, Tail};
use crate::context::Context;
use crate::redact::{self, Output};
use crate::render::escape_controls;
use crate::watch::{Look, Watch};

/// How often the change feed looks at the store.
const LOOK: Duration = Duration::from_millis(100);

/// How long the change feed waits before opening the store again after
/// it could not.
const RETRY: Duration = Duration::from_secs(5);

/// The longest a listener waits for the watch to start before `ready`.
const READY_WAIT: Duration = Duration::from_secs(10);

/// The change feed's sender, made (and its watching thread started) by
/// the first listener.
pub(super) struct Hub {
    changes: OnceLock<broadcast::Sender<Look>>,
    /// Whether the thread watches the store yet (on PostgreSQL, whether
    /// it `LISTEN`s): a listener's `ready` waits for it, so no change
    /// made after `ready` goes unheard.
    watching: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Hub {
    fn default() -> Hub {
        Hub {
            changes: OnceLock::new(),
            watching: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }
}

impl Hub {
    /// A receiver of the store's changes; the first call starts the
    /// thread that watches it.
    fn subscribe(&self, ctx: &Arc<Context>) -> broadcast::Receiver<Look> {
        self.changes
            .get_or_init(|| {
                let (tx, _) = broadcast::channel(16);
                let sender = tx.clone();
                let ctx = Arc::clone(ctx);
                let watching = Arc::clone(&self.watching);
                // Not on tokio's blocking pool: it runs as long as the
                // server does.
                let spawned = std::thread::Builder::new()
                    .name("loops-serve-watch".to_owned())
                    .spawn(move || watch(&ctx, &sender, &watching));
                if let Err(e) = spawned {
                    tracing_line(&format!("cannot watch the store for changes: {e}"));
                }
                tx
            })
            .subscribe()
    }
}

/// Says a line about the server on its stderr.
fn tracing_line(line: &str) {
    eprintln!("loops serve: {line}");
}

/// Watches the store and sends a change to every listener, for as long as
/// the process lives.
fn watch(
    ctx: &Context,
    changes: &broadcast::Sender<Look>,
    watching: &tokio::sync::watch::Sender<bool>,
) {
    loop {
        let store = match ctx.open_store() {
            Ok(store) => store,
            Err(e) => {
                tracing_line(&format!("the change feed cannot open the store: {e}"));
                std::thread::sleep(RETRY);
                continue;
            }
        };
        let mut watch = Watch::new(&store, "serve");
        watching.send_replace(true);
        loop {
            std::thread::sleep(LOOK);
            let look = watch.look();
            if look != Look::Quiet {
                // No listener is no error: the next one subscribes anew.
                let _ = changes.send(look);
            }
        }
    }
}

/// `GET /api/v1/events`: a `change` event each time the store changed, a
/// `tick` when it did not for a while.
pub(super) async fn events(shared: Arc<Shared>) -> Response {
    let changes = shared.hub.subscribe(&shared.ctx);
    // At most a few seconds: a store that cannot be opened still gets its
    // ticks once it can.
    let mut watching = shared.hub.watching.subscribe();
    let _ = tokio::time::timeout(READY_WAIT, watching.wait_for(|w| *w)).await;
    let stream = stream::unfold(changes, |mut changes| async move {
        loop {
            match changes.recv().await {
                Ok(look) => {
                    let name = if look == Look::Changed {
                        "change"
                    } else {
                        "tick"
                    };
                    return Some((Event::default().event(name).data("{}"), changes));
                }
                // A slow listener missed some: one event says as much.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    streamed(stream)
}

/// `GET /api/v1/runs/{id}/output?follow=1&showOutput=1`: the run's output
/// as it is written, then its end. `target` is a run id, or a loop whose
/// latest run is followed, as `loops logs -f` takes it.
pub(super) async fn follow(shared: Arc<Shared>, target: String) -> Response {
    let ctx = Arc::clone(&shared.ctx);
    let found = tokio::task::spawn_blocking(move || {
        let store = ctx.open_store()?;
        logs::find_run(&store, &target)
    })
    .await;
    let run = match found {
        Ok(Ok(run)) => run,
        Ok(Err(e)) => {
            let (status, code) = crate::fault::Fault::of(&e).status();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return error(status, code, &crate::exit::message(&e, shared.ctx.verbose));
        }
        Err(join) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                &format!("the request failed: {join}"),
            );
        }
    };
    let (tx, rx) = mpsc::channel(64);
    let ctx = Arc::clone(&shared.ctx);
    let spawned = std::thread::Builder::new()
        .name("loops-serve-follow".to_owned())
        .spawn(move || follow_run(&ctx, run, &tx));
    if let Err(e) = spawned {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            &format!("cannot follow the run: {e}"),
        );
    }
    let stream = stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        Some((event, rx))
    });
    streamed(stream)
}

/// The response of an event stream: a `ready` event, then `events`.
fn streamed(events: impl Stream<Item = Event> + Send + 'static) -> Response {
    use futures_util::StreamExt as _;
    let ready = stream::once(async { Event::default().event("ready").data("{}") });
    let all = ready.chain(events).map(Ok::<Event, Infallible>);
    Sse::new(all)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The lines one look at the log found.
#[derive(Default)]
struct Batch(Vec<String>);

impl Lines for Batch {
    fn line(&mut self, text: &str) -> std::io::Result<()> {
        self.0.push(escape_controls(text, &['\t']).into_owned());
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Batch {
    /// Sends the lines gathered as one `output` event; whether the client
    /// is still there.
    fn send(&mut self, tx: &mpsc::Sender<Event>) -> bool {
        if self.0.is_empty() {
            return !tx.is_closed();
        }
        let text = std::mem::take(&mut self.0).join("\n");
        tx.blocking_send(Event::default().event("output").data(text))
            .is_ok()
    }
}

/// Follows `run` until it ends or the client goes, sending its output and
/// then its end.
fn follow_run(ctx: &Context, mut run: LoopRun, tx: &mpsc::Sender<Event>) {
    let ended = |message: String| Event::default().event("error").data(message);
    let store = match ctx.open_store() {
        Ok(store) => store,
        Err(e) => {
            let _ = tx.blocking_send(ended(format!("cannot open the store: {e}")));
            return;
        }
    };
    let path = match logs::log_path(ctx, &run) {
        Ok(path) => path,
        Err(e) => {
            let _ = tx.blocking_send(ended(format!("cannot find the run's log: {e}")));
            return;
        }
    };
    let mut tail = Tail::new(path);
    let mut batch = Batch::default();
    loop {
        // The status first: a run seen finished has written its log.
        let current = match store.get_run(&run.id) {
            Ok(current) => current,
            Err(e) => {
                let _ = tx.blocking_send(ended(format!("cannot read the run: {e}")));
                return;
            }
        };
        let finished = current
            .as_ref()
            .is_none_or(|r| r.status != RunStatus::Running);
        if let Some(current) = current {
            run = current;
        }
        if finished {
            break;
        }
        if tail.pump(ctx, &mut batch).is_err() || !batch.send(tx) {
            return;
        }
        std::thread::sleep(logs::POLL);
    }
    if tail.finish(ctx, &mut batch).is_err() {
        return;
    }
    if !tail.seen_file() {
        let stored = crate::human::steps::stored_text(ctx, &run);
        let text = stored.strip_suffix('\n').unwrap_or(&stored);
        if !text.is_empty() {
            for line in text.split('\n') {
                let _ = batch.line(line.strip_suffix('\r').unwrap_or(line));
            }
        }
    }
    if !batch.send(tx) {
        return;
    }
    let doc = redact::run_json(&run, Output::Redacted);
    let _ = tx.blocking_send(Event::default().event("end").data(doc.to_string()));
}
