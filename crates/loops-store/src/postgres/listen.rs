//! Wake-ups across hosts: a thread with a connection of its own that
//! `LISTEN`s on `loops_wake`, which the table operations `pg_notify` in the
//! transactions that change what is due (create, resume, finalize, …) or
//! what a dashboard shows (pause, stop, remove).
//!
//! A notification only wakes a daemon early; its deadline-driven sleep
//! stays the source of truth, so a lost notification costs latency, never
//! a run. After a lost connection the thread connects again (with the
//! connector's backoff), listens again and wakes the daemon once, since
//! notifications sent meanwhile are gone. Behind PgBouncer in transaction
//! mode `LISTEN` hears nothing: such deployments run the daemon with
//! `--poll-only`, which starts no listener.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::connect::Connector;
use crate::error::{OpenError, Result};

/// The channel every wake-up goes to.
pub(crate) const CHANNEL: &str = "loops_wake";

/// How often the thread looks at its stop flag while no notification
/// arrives.
const STOP_POLL: Duration = Duration::from_millis(250);

/// Notifications closer together than this wake the daemon once.
const COALESCE: Duration = Duration::from_millis(20);

/// A running listener thread; dropping it stops the thread.
#[derive(Debug)]
pub struct Listener {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Starts listening with a connection of `connector`'s; `on_wake` runs on
/// the listener thread for each burst of notifications, and once after
/// every reconnect. `on_error` gets a line when the connection is lost and
/// when it is back. Fails when the first connection or `LISTEN` fails.
pub(super) fn listen(
    connector: Connector,
    on_wake: Box<dyn Fn() + Send>,
    on_error: Box<dyn Fn(&str) + Send>,
) -> Result<Listener, OpenError> {
    let mut client = connector.connect()?;
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .map_err(OpenError::db("listening for wake-ups"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("loops-listen".into())
        .spawn(move || {
            let mut client = Some(client);
            let mut last_wake: Option<Instant> = None;
            // A notification inside the coalescing window is held, not
            // dropped: it wakes the daemon once the window has passed.
            let mut held = false;
            while !stopped.load(Ordering::Relaxed) {
                let Some(c) = client.as_mut() else {
                    match connector.reconnect().and_then(|mut c| {
                        c.batch_execute(&format!("LISTEN {CHANNEL}"))
                            .map_err(OpenError::db("listening for wake-ups"))?;
                        Ok(c)
                    }) {
                        Ok(c) => {
                            on_error("listening for wake-ups again");
                            client = Some(c);
                            last_wake = Some(Instant::now());
                            held = false;
                            on_wake();
                        }
                        Err(_) => std::thread::sleep(STOP_POLL),
                    }
                    continue;
                };
                let (woken, lost) = {
                    let mut notes = c.notifications();
                    let wait = match last_wake {
                        Some(t) if held => COALESCE.saturating_sub(t.elapsed()),
                        _ => STOP_POLL,
                    };
                    let first = notes.timeout_iter(wait).next();
                    match first {
                        Ok(Some(_)) => {
                            // A burst wakes once: take what already arrived.
                            let mut pending = notes.iter();
                            while let Ok(Some(_)) = pending.next() {}
                            (true, None)
                        }
                        Ok(None) => (false, None),
                        Err(e) => (false, Some(e)),
                    }
                };
                if lost.is_some() || c.is_closed() {
                    let why = lost.map_or_else(
                        || "closed".to_owned(),
                        |e| crate::error::DbError::from(e).to_string(),
                    );
                    on_error(&format!(
                        "the wake-up connection was lost ({why}); reconnecting"
                    ));
                    client = None;
                    continue;
                }
                held |= woken;
                if held && last_wake.is_none_or(|t| t.elapsed() >= COALESCE) {
                    last_wake = Some(Instant::now());
                    held = false;
                    on_wake();
                }
            }
        })
        .map_err(|e| OpenError::Io {
            path: "loops-listen thread".into(),
            error: e,
        })?;
    Ok(Listener {
        stop,
        thread: Some(thread),
    })
}
