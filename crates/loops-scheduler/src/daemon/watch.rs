//! File watches (issue 30, `docs/triggers.md` T8–T9): the daemon watches
//! the paths of the active loops it matches, and a burst of changes under
//! one of them, once quiet for the loop's debounce, adds a `watch` trigger
//! that the dispatcher claims like any other.
//!
//! The `notify` crate's thread only records what changed and when, in a
//! bounded inbox, and wakes the daemon; everything else happens on the
//! daemon's store thread, at the start of a turn: [`Watches::sync`] makes
//! the watched paths those of the loops in the database, [`Watches::take`]
//! files the changes under the loops whose paths cover them, and
//! [`Watches::fire`] hands each loop whose burst has been quiet for its
//! debounce to [`Store::add_watch_trigger`], which drops a change the
//! loop's own run made (T9). [`Watches::next_deadline`] is the end of the
//! earliest debounce, so the daemon sleeps no longer.
//!
//! A file is watched through its directory, so an editor that replaces the
//! file keeps it watched; a directory is watched with everything under it.
//! A path that cannot be watched (it does not exist yet, or the inotify
//! limit is reached) is logged once and tried again every
//! [`RETRY_UNWATCHABLE`]. When the inbox overflows, or the OS says events
//! were lost, every loop counts as changed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loops_core::{Loop, LoopId, Timestamp, Watch, placement_matches};
use loops_store::{Store, StoreError, WatchFired};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::dispatch::Report;

/// The most changes the inbox holds between two turns; past it, every
/// loop counts as changed.
const INBOX_CAP: usize = 4_096;

/// How often a path that could not be watched is tried again.
const RETRY_UNWATCHABLE: Duration = Duration::from_secs(30);

/// What `notify`'s thread leaves for the daemon.
#[derive(Debug, Default)]
struct Inbox {
    changes: Vec<(PathBuf, Instant)>,
    /// Changes were dropped (a full inbox, or lost by the OS).
    overflow: Option<Instant>,
    /// The last watcher error, to log once.
    error: Option<String>,
}

/// One watched loop.
#[derive(Debug)]
struct Watched {
    name: String,
    watch: Watch,
    /// The last change of the current burst: when, on both clocks.
    burst: Option<(Instant, Timestamp)>,
    /// A path of the burst, for the log.
    what: Option<PathBuf>,
    /// The last burst was dropped as the loop's own (T9): the next one
    /// is not logged, so a long run that writes all along logs one line.
    own_said: bool,
}

/// The daemon's watcher and the loops it watches for.
pub(crate) struct Watches {
    watcher: Option<RecommendedWatcher>,
    inbox: Arc<Mutex<Inbox>>,
    loops: BTreeMap<LoopId, Watched>,
    /// Each path given to the watcher, with its mode.
    watched: HashMap<PathBuf, RecursiveMode>,
    /// Paths that could not be watched, and when to try again.
    failed: HashMap<PathBuf, Instant>,
    /// The watcher could not be created; said once.
    unavailable: bool,
    /// When the watch loops are next read from the store: at the first
    /// turn, after a wake-up (a CLI or `NOTIFY` may have changed loops),
    /// and at least every [`RESYNC_EVERY`]; not at every busy turn.
    next_sync: Option<Instant>,
}

/// The longest a change to the watch loops waits for a turn to read it
/// when no wake-up announced it (a daemon that only polls).
const RESYNC_EVERY: Duration = Duration::from_secs(5);

impl Watches {
    /// A watcher whose changes wake the daemon through `wake`.
    pub(crate) fn new(wake: Sender<Report>) -> Watches {
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let shared = Arc::clone(&inbox);
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(mut inbox) = shared.lock() else {
                return;
            };
            let was_empty =
                inbox.changes.is_empty() && inbox.overflow.is_none() && inbox.error.is_none();
            let now = Instant::now();
            match res {
                // Reading a file changes nothing.
                Ok(event) if matches!(event.kind, EventKind::Access(_)) => return,
                Ok(event) if event.need_rescan() => inbox.overflow = Some(now),
                Ok(event) => {
                    for path in event.paths {
                        if inbox.changes.len() < INBOX_CAP {
                            inbox.changes.push((path, now));
                        } else {
                            inbox.overflow = Some(now);
                        }
                    }
                }
                Err(e) => inbox.error = Some(e.to_string()),
            }
            if was_empty {
                let _ = wake.send(Report::Wake);
            }
        });
        let (watcher, unavailable) = match watcher {
            Ok(w) => (Some(w), false),
            Err(e) => {
                inbox.lock().map(|mut i| i.error = Some(e.to_string())).ok();
                (None, true)
            }
        };
        Watches {
            watcher,
            inbox,
            loops: BTreeMap::new(),
            watched: HashMap::new(),
            failed: HashMap::new(),
            unavailable,
            next_sync: None,
        }
    }

    /// Something may have changed the loops: read them at the next turn.
    pub(crate) fn woken(&mut self) {
        self.next_sync = None;
    }

    /// Makes the watched loops and paths those of the active loops in the
    /// database that `labels` match (T8: only a matching daemon watches).
    pub(crate) fn sync(
        &mut self,
        store: &Store,
        labels: &[String],
        log: &dyn Fn(&str),
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        if self.next_sync.is_some_and(|at| now < at) {
            return Ok(());
        }
        self.next_sync = Some(now + RESYNC_EVERY);
        let wanted: Vec<Loop> = store
            .watch_loops()?
            .into_iter()
            .filter(|lp| placement_matches(&lp.policy.runs_on, labels))
            .collect();
        self.loops
            .retain(|id, _| wanted.iter().any(|lp| lp.id == *id));
        for lp in wanted {
            let Some(watch) = lp.policy.watch else {
                continue;
            };
            match self.loops.get_mut(&lp.id) {
                Some(w) => {
                    w.name = lp.name;
                    w.watch = watch;
                }
                None => {
                    self.loops.insert(
                        lp.id,
                        Watched {
                            name: lp.name,
                            watch,
                            burst: None,
                            what: None,
                            own_said: false,
                        },
                    );
                }
            }
        }
        self.sync_paths(log);
        Ok(())
    }

    /// Gives the watcher the paths the loops need, and takes back the
    /// ones no loop needs any more.
    fn sync_paths(&mut self, log: &dyn Fn(&str)) {
        let Some(watcher) = &mut self.watcher else {
            if std::mem::take(&mut self.unavailable) {
                let error = self.inbox.lock().ok().and_then(|mut i| i.error.take());
                log(&format!(
                    "error: cannot watch files: {}; --watch loops are not triggered",
                    error.unwrap_or_default()
                ));
            }
            return;
        };
        let mut wanted: HashMap<PathBuf, RecursiveMode> = HashMap::new();
        for w in self.loops.values() {
            for path in &w.watch.paths {
                let (target, mode) = watch_target(Path::new(path));
                let entry = wanted.entry(target).or_insert(mode);
                if mode == RecursiveMode::Recursive {
                    *entry = mode;
                }
            }
        }
        let stale: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|(p, mode)| wanted.get(*p) != Some(mode))
            .map(|(p, _)| p.clone())
            .collect();
        for path in stale {
            let _ = watcher.unwatch(&path);
            self.watched.remove(&path);
        }
        self.failed.retain(|p, _| wanted.contains_key(p));
        let now = Instant::now();
        for (path, mode) in wanted {
            if self.watched.contains_key(&path) {
                continue;
            }
            if self.failed.get(&path).is_some_and(|at| now < *at) {
                continue;
            }
            match watcher.watch(&path, mode) {
                Ok(()) => {
                    let again = if self.failed.remove(&path).is_some() {
                        " again"
                    } else {
                        ""
                    };
                    log(&format!("watching {}{again}", path.display()));
                    self.watched.insert(path, mode);
                }
                Err(e) => {
                    if self
                        .failed
                        .insert(path.clone(), now + RETRY_UNWATCHABLE)
                        .is_none()
                    {
                        log(&format!(
                            "warning: cannot watch {}: {e}; trying again every {}s",
                            path.display(),
                            RETRY_UNWATCHABLE.as_secs()
                        ));
                    }
                }
            }
        }
    }

    /// Files the changes `notify` reported under the loops whose paths
    /// cover them. `now` is the wall clock, to date them.
    pub(crate) fn take(&mut self, now: Timestamp, log: &dyn Fn(&str)) {
        let inbox = match self.inbox.lock() {
            Ok(mut inbox) => std::mem::take(&mut *inbox),
            Err(_) => return,
        };
        if let Some(error) = inbox.error {
            log(&format!("warning: watching files: {error}"));
        }
        let instant = Instant::now();
        let dated = |at: Instant| {
            let ago = i64::try_from(instant.saturating_duration_since(at).as_millis());
            now.add_ms(-ago.unwrap_or(0))
        };
        for (path, at) in inbox.changes {
            // A watched directory that went away is watched again when it
            // comes back.
            if self.watched.contains_key(&path) && !path.exists() {
                self.watched.remove(&path);
            }
            for w in self.loops.values_mut() {
                if w.watch.covers(&path) {
                    w.note(at, dated(at), &path);
                }
            }
        }
        if let Some(at) = inbox.overflow {
            for w in self.loops.values_mut() {
                let path = PathBuf::from(w.watch.paths.first().map_or("/", String::as_str));
                w.note(at, dated(at), &path);
            }
        }
    }

    /// Adds a `watch` trigger for each loop whose burst of changes has
    /// been quiet for its debounce; returns how many were added.
    pub(crate) fn fire(
        &mut self,
        store: &Store,
        now: Timestamp,
        log: &dyn Fn(&str),
    ) -> Result<usize, StoreError> {
        let instant = Instant::now();
        let mut added = 0;
        for (id, w) in &mut self.loops {
            let Some((last, changed_at)) = w.burst else {
                continue;
            };
            if instant < last + w.debounce() {
                continue;
            }
            w.burst = None;
            let what = w.what.take().unwrap_or_default();
            match store.add_watch_trigger(id, changed_at, now)? {
                WatchFired::Added(_) => {
                    added += 1;
                    w.own_said = false;
                    log(&format!(
                        "loop {} ({id}): {} changed; run triggered",
                        w.name,
                        what.display()
                    ));
                }
                WatchFired::OwnRun if !w.own_said => {
                    w.own_said = true;
                    log(&format!(
                        "loop {} ({id}): {} changed while its run ran or just after; \
                         not triggered again",
                        w.name,
                        what.display()
                    ));
                }
                _ => {}
            }
        }
        Ok(added)
    }

    /// When the earliest debounce ends, if a burst is open.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.loops
            .values()
            .filter_map(|w| w.burst.map(|(last, _)| last + w.debounce()))
            .min()
    }
}

impl Watched {
    fn debounce(&self) -> Duration {
        Duration::from_millis(self.watch.debounce_ms)
    }

    /// Records a change at `at` (`changed_at` on the wall clock).
    fn note(&mut self, at: Instant, changed_at: Timestamp, path: &Path) {
        if self.burst.is_none_or(|(last, _)| last <= at) {
            self.burst = Some((at, changed_at));
        }
        if self.what.is_none() {
            self.what = Some(path.to_path_buf());
        }
    }
}

/// What to give the watcher for watched `path`: a directory with
/// everything under it, or a file's directory alone (an editor that saves
/// by renaming a new file over the old one would end a watch of the file
/// itself). A path that does not exist yet is tried as a directory.
fn watch_target(path: &Path) -> (PathBuf, RecursiveMode) {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_dir() => match path.parent() {
            Some(dir) => (dir.to_path_buf(), RecursiveMode::NonRecursive),
            None => (path.to_path_buf(), RecursiveMode::NonRecursive),
        },
        _ => (path.to_path_buf(), RecursiveMode::Recursive),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_watched_through_its_directory_and_a_directory_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.conf");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            watch_target(&file),
            (dir.path().to_path_buf(), RecursiveMode::NonRecursive)
        );
        assert_eq!(
            watch_target(dir.path()),
            (dir.path().to_path_buf(), RecursiveMode::Recursive)
        );
        let missing = dir.path().join("later");
        assert_eq!(watch_target(&missing), (missing, RecursiveMode::Recursive));
    }

    #[test]
    fn a_burst_keeps_its_last_change_and_first_path() {
        let mut w = Watched {
            name: "w".to_owned(),
            watch: Watch {
                paths: vec!["/a".to_owned()],
                debounce_ms: 500,
            },
            burst: None,
            what: None,
            own_said: false,
        };
        let t0 = Instant::now();
        let at = |ms: i64| Timestamp::from_millis(1_000_000 + ms).unwrap();
        w.note(t0 + Duration::from_millis(10), at(10), Path::new("/a/x"));
        w.note(t0, at(0), Path::new("/a/y"));
        assert_eq!(w.burst, Some((t0 + Duration::from_millis(10), at(10))));
        assert_eq!(w.what.as_deref(), Some(Path::new("/a/x")));
        w.note(t0 + Duration::from_millis(20), at(20), Path::new("/a/z"));
        assert_eq!(w.burst, Some((t0 + Duration::from_millis(20), at(20))));
        assert_eq!(w.debounce(), Duration::from_millis(500));
    }
}
