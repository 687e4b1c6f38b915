//! One tail per followed run, whatever the number of its followers
//! (issue 29: 50 followers of a busy run must cost the server little).
//!
//! The first follower of a run starts a thread that follows it as
//! `loops logs -f` does, with the same [`Tail`]: every [`logs::POLL`] it
//! reads the run's status and the new complete lines of its log, and
//! publishes each batch (control characters escaped) to every follower.
//! It keeps what it published, up to [`MOST_KEPT`] bytes, so a follower
//! who joins late gets the output from the start. When the run ends it
//! publishes the rest (the stored output when this host has no log) and
//! the run's `--json` object, output redacted; when the last follower has
//! gone it stops early.
//!
//! Locks are taken in one order, the map of runs then a run's state, and
//! a follower joins (reads what was kept and subscribes) under both, so it
//! misses nothing and gets nothing twice.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use loops_core::{LoopRun, RunId, RunStatus};
use tokio::sync::broadcast;

use crate::commands::logs::{self, Lines, Tail};
use crate::context::Context;
use crate::redact::{self, Output};
use crate::render::escape_controls;

/// The most output a run's tail keeps for late followers.
const MOST_KEPT: usize = 8 << 20;

/// Parts of a run's stream a slow follower may fall behind by before it
/// misses some.
const BACKLOG: usize = 1024;

/// A part of a followed run's stream.
#[derive(Debug, Clone)]
pub(super) enum Part {
    /// Lines of output, joined by line breaks.
    Output(Arc<str>),
    /// The run ended: its `--json` object.
    End(Arc<str>),
    /// Following failed: why.
    Error(Arc<str>),
}

/// The runs followed now.
#[derive(Default)]
pub(super) struct Follows {
    runs: Mutex<HashMap<RunId, Arc<Follow>>>,
}

/// One followed run.
struct Follow {
    state: Mutex<State>,
}

/// What a run's tail has published.
struct State {
    kept: VecDeque<Arc<str>>,
    kept_bytes: usize,
    /// Whether the oldest output was let go.
    trimmed: bool,
    /// How the stream ended, once it has.
    end: Option<Part>,
    tx: broadcast::Sender<Part>,
}

/// What a follower gets on joining: the parts published before, then the
/// live ones.
pub(super) struct Joined {
    pub(super) before: Vec<Part>,
    pub(super) live: broadcast::Receiver<Part>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicked publisher leaves consistent state: each change is one
    // push under the lock.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Follows {
    /// Joins the tail of `run`, starting it when nobody follows the run
    /// yet.
    pub(super) fn join(
        self: &Arc<Self>,
        ctx: &Arc<Context>,
        run: LoopRun,
    ) -> std::io::Result<Joined> {
        let mut runs = lock(&self.runs);
        if let Some(follow) = runs.get(&run.id) {
            return Ok(follow.join());
        }
        let follow = Arc::new(Follow {
            state: Mutex::new(State {
                kept: VecDeque::new(),
                kept_bytes: 0,
                trimmed: false,
                end: None,
                tx: broadcast::channel(BACKLOG).0,
            }),
        });
        // Subscribed before the thread starts: it stops when nobody is.
        let joined = follow.join();
        let id = run.id;
        let (ctx, follows, published) = (Arc::clone(ctx), Arc::clone(self), Arc::clone(&follow));
        std::thread::Builder::new()
            .name("loops-serve-follow".to_owned())
            .spawn(move || {
                tail(
                    &ctx,
                    run,
                    &Publisher {
                        follows,
                        follow: published,
                    },
                )
            })?;
        runs.insert(id, follow);
        Ok(joined)
    }
}

impl Follow {
    fn join(&self) -> Joined {
        let state = lock(&self.state);
        let mut before = Vec::with_capacity(state.kept.len() + 2);
        if state.trimmed {
            before.push(Part::Output(Arc::from(
                "[… earlier output is no longer kept here; loops logs shows it all …]",
            )));
        }
        before.extend(state.kept.iter().cloned().map(Part::Output));
        before.extend(state.end.clone());
        Joined {
            before,
            live: state.tx.subscribe(),
        }
    }
}

/// Where a run's tail publishes.
struct Publisher {
    follows: Arc<Follows>,
    follow: Arc<Follow>,
}

impl Publisher {
    /// Publishes `lines`; whether anybody still follows.
    fn output(&self, lines: Vec<String>) -> bool {
        let mut state = lock(&self.follow.state);
        if !lines.is_empty() {
            let text: Arc<str> = Arc::from(lines.join("\n"));
            state.kept_bytes += text.len();
            state.kept.push_back(Arc::clone(&text));
            while state.kept_bytes > MOST_KEPT {
                let Some(old) = state.kept.pop_front() else {
                    break;
                };
                state.kept_bytes -= old.len();
                state.trimmed = true;
            }
            // Nobody listening is not an error: checked below.
            let _ = state.tx.send(Part::Output(text));
        }
        state.tx.receiver_count() > 0
    }

    /// Ends the stream with `part`: the run is no longer followed.
    fn end(&self, part: Part, id: &RunId) {
        let mut runs = lock(&self.follows.runs);
        let mut state = lock(&self.follow.state);
        let _ = state.tx.send(part.clone());
        state.end = Some(part);
        runs.remove(id);
    }

    /// Whether nobody follows, checked under the map's lock, so that no
    /// follower joins a tail about to stop.
    fn deserted(&self, id: &RunId) -> bool {
        let mut runs = lock(&self.follows.runs);
        let nobody = lock(&self.follow.state).tx.receiver_count() == 0;
        if nobody {
            runs.remove(id);
        }
        nobody
    }
}

/// The lines one look at the log found, escaped for display.
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

/// Follows `run` until it ends or nobody follows it, publishing its output
/// and then its end.
fn tail(ctx: &Context, mut run: LoopRun, out: &Publisher) {
    let id = run.id;
    let failed = |why: String| out.end(Part::Error(Arc::from(why)), &id);
    let store = match ctx.open_store() {
        Ok(store) => store,
        Err(e) => return failed(format!("cannot open the store: {e}")),
    };
    let mut tail = match logs::log_path(ctx, &run) {
        Ok(path) => Tail::new(path),
        Err(e) => return failed(format!("cannot find the run's log: {e}")),
    };
    let mut batch = Batch::default();
    loop {
        // The status first: a run seen finished has written its log.
        let current = match store.get_run(&run.id) {
            Ok(current) => current,
            Err(e) => return failed(format!("cannot read the run: {e}")),
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
        if let Err(e) = tail.pump(ctx, &mut batch) {
            return failed(format!("cannot read the run's log: {e}"));
        }
        if !out.output(std::mem::take(&mut batch.0)) && out.deserted(&id) {
            return;
        }
        std::thread::sleep(logs::POLL);
    }
    if let Err(e) = tail.finish(ctx, &mut batch) {
        return failed(format!("cannot read the run's log: {e}"));
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
    out.output(std::mem::take(&mut batch.0));
    let doc = redact::run_json(&run, Output::Redacted).to_string();
    out.end(Part::End(Arc::from(doc)), &id);
}
