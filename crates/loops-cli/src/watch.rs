//! When `loops ui` reads the store again, and when `loops serve` tells its
//! pages to: when it changed, not on a fixed beat (issue 29).
//!
//! - On SQLite, every commit of any process writes the database's WAL (or
//!   the file itself), so a change of either file's size or modification
//!   time is a change of the store; looking costs two `stat` calls.
//! - On PostgreSQL, `LISTEN` wakes it when any host changes what is due
//!   ([`Store::listen`]); a run's end notifies nobody, so a slower look
//!   covers it.
//!
//! Either way a slow fallback keeps relative times (`in 4m`) current.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use loops_store::{Listener, Location, Store};

/// The longest a view goes without reading the store on SQLite.
const SQLITE_FALLBACK: Duration = Duration::from_secs(5);

/// The same on PostgreSQL, where a run's end wakes nobody.
const POSTGRES_FALLBACK: Duration = Duration::from_secs(2);

/// What a look at the store found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// Nothing to read again yet.
    Quiet,
    /// The store changed.
    Changed,
    /// Nothing changed, but the fallback's time came: relative times
    /// (`in 4m`) moved on.
    Stale,
}

/// What a file looked like: its size and modification time.
type Seen = Option<(u64, SystemTime)>;

/// The watch over one store.
pub(crate) struct Watch {
    files: Vec<(PathBuf, Seen)>,
    woken: Arc<AtomicBool>,
    _listener: Option<Listener>,
    fallback: Duration,
    last: Instant,
}

impl Watch {
    /// Watches `store`: its files on SQLite, its notifications on
    /// PostgreSQL (without them, the fallback alone). `who` names the
    /// listening connection (`ui`, `serve`).
    pub(crate) fn new(store: &Store, who: &str) -> Watch {
        let woken = Arc::new(AtomicBool::new(false));
        let (files, listener, fallback) = match store.location() {
            Some(Location::File(db)) => {
                let mut wal = db.clone().into_os_string();
                wal.push("-wal");
                let files = [db, PathBuf::from(wal)]
                    .into_iter()
                    .map(|path| {
                        let seen = look(&path);
                        (path, seen)
                    })
                    .collect();
                (files, None, SQLITE_FALLBACK)
            }
            _ => {
                let flag = Arc::clone(&woken);
                let listener = store
                    .listen(
                        who,
                        Box::new(move || flag.store(true, Ordering::Relaxed)),
                        Box::new(|_| {}),
                    )
                    .ok()
                    .flatten();
                (Vec::new(), listener, POSTGRES_FALLBACK)
            }
        };
        Watch {
            files,
            woken,
            _listener: listener,
            fallback,
            last: Instant::now(),
        }
    }

    /// Whether the store should be read again now: it changed, or the
    /// fallback's time has come. Either way the clock starts over.
    pub(crate) fn due(&mut self) -> bool {
        self.look() != Look::Quiet
    }

    /// Why the store should be read again now, if it should.
    pub(crate) fn look(&mut self) -> Look {
        let mut changed = self.woken.swap(false, Ordering::Relaxed);
        for (path, seen) in &mut self.files {
            let now = look(path);
            if now != *seen {
                *seen = now;
                changed = true;
            }
        }
        let why = if changed {
            Look::Changed
        } else if self.last.elapsed() >= self.fallback {
            Look::Stale
        } else {
            return Look::Quiet;
        };
        self.last = Instant::now();
        why
    }

    /// Asks for a read at the next look (after a change made here).
    pub(crate) fn poke(&mut self) {
        self.woken.store(true, Ordering::Relaxed);
    }
}

/// `path`'s size and modification time, `None` when it is missing.
fn look(path: &std::path::Path) -> Seen {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}
