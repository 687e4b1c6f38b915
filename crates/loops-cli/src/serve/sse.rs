//! Server-sent events (issue 29): a run's output as it is written
//! (`/api/v1/runs/{id}/output?follow=1&showOutput=1`) and the store's
//! change feed (`/api/v1/events`), which the pages' script listens to.
//!
//! - **Output** is followed as `loops logs -f` follows it, by one tail
//!   per run shared by all its followers (`follow`): each batch of
//!   complete lines is an `output` event (control characters escaped, as
//!   on a terminal), and the stream ends with an `end` event holding the
//!   run's `--json` object (output redacted). A run without a log on this
//!   host (another host's, a workflow's) sends its stored output once it
//!   ends.
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
use futures_util::StreamExt as _;
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast;

use super::Shared;
use super::follow::{Follows, Part};
use super::routes::error;
use crate::commands::logs;
use crate::context::Context;
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
    /// The runs whose output is followed now.
    follows: Arc<Follows>,
}

impl Default for Hub {
    fn default() -> Hub {
        Hub {
            changes: OnceLock::new(),
            watching: Arc::new(tokio::sync::watch::Sender::new(false)),
            follows: Arc::default(),
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
                    say(&format!("cannot watch the store for changes: {e}"));
                }
                tx
            })
            .subscribe()
    }
}

/// Says a line about the server on its stderr.
fn say(line: &str) {
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
                say(&format!("the change feed cannot open the store: {e}"));
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
    let joined = match shared.hub.follows.join(&shared.ctx, run) {
        Ok(joined) => joined,
        Err(e) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                &format!("cannot follow the run: {e}"),
            );
        }
    };
    let before = stream::iter(joined.before);
    let live = stream::unfold(joined.live, |mut live| async move {
        let part = match live.recv().await {
            Ok(part) => part,
            Err(broadcast::error::RecvError::Lagged(n)) => Part::Output(Arc::from(format!(
                "[… {n} batches of output skipped: this follower fell behind …]"
            ))),
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((part, live))
    });
    // The stream ends with the run's end, or with an error.
    let parts = before.chain(live).scan(false, |over, part| {
        let next = (!*over).then(|| {
            *over = !matches!(part, Part::Output(_));
            event(&part)
        });
        std::future::ready(next)
    });
    streamed(parts)
}

/// The event of a part of a run's stream.
fn event(part: &Part) -> Event {
    match part {
        Part::Output(text) => Event::default().event("output").data(&**text),
        Part::End(doc) => Event::default().event("end").data(&**doc),
        Part::Error(why) => Event::default().event("error").data(&**why),
    }
}

/// The response of an event stream: a `ready` event, then `events`.
fn streamed(events: impl Stream<Item = Event> + Send + 'static) -> Response {
    let ready = stream::once(async { Event::default().event("ready").data("{}") });
    let all = ready.chain(events).map(Ok::<Event, Infallible>);
    Sse::new(all)
        .keep_alive(KeepAlive::default())
        .into_response()
}
