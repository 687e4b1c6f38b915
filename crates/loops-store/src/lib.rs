//! SQLite persistence for loops (SPEC §4).
//!
//! [`Store`] is one connection to one `loops.db`. Every claim, lease,
//! finalize and state change is a single guarded statement or a single
//! `BEGIN IMMEDIATE` transaction, so two processes sharing a database never
//! double-claim a slot, never lose a finalize, and never strand a loop
//! between a finalized run and its advance (SPEC §9 items 7–12).
//!
//! Architecture invariant: this is the only crate that knows SQL, and no
//! rusqlite type appears in its public API (errors wrap it as [`DbError`]),
//! so a PostgreSQL backend can implement the same operations: every
//! `Store` method goes through the backend seam of `backend.rs`.
//! The store does no process work: liveness checks go through the
//! [`Liveness`] it is given.
//!
//! ```
//! use loops_store::Store;
//! let store = Store::open_in_memory(std::sync::Arc::new(|_| false)).unwrap();
//! assert_eq!(store.count_loops(None).unwrap(), 0);
//! ```

mod backend;
mod daemon;
mod error;
mod lease;
mod loops;
mod runs;
mod secure;
mod sqlite;
mod steps;
mod workflow_runs;
mod workflows;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loops_core::Liveness;

use crate::backend::Backend;
use crate::sqlite::{Sqlite, open};

// The public API, by table.
pub use crate::error::{DbError, Result, StoreError};
// `loops`
pub use crate::loops::{
    DEFAULT_LOOP_LIMIT, DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, Refusal,
};
// `loop_runs`
pub use crate::runs::{
    Advance, Claim, DEFAULT_RUN_LIMIT, Fence, Finalized, INTERRUPTED_BY_SHUTDOWN, NotClaimed,
    OVERLAP_SKIP_REASON, Recovered, Released, RunFilter, SkipOutcome,
};
// `daemon_lease`
pub use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
// The daemon's reads across tables.
pub use crate::daemon::{HostRun, NextWake, new_lease_id};
// `workflow_specs` and `workflow_events`
pub use crate::workflows::{DEFAULT_EVENT_LIST_LIMIT, DEFAULT_WORKFLOW_LIST_LIMIT, WorkflowFilter};
// `workflow_runs`
pub use crate::workflow_runs::{
    DEFAULT_CANCEL_REASON, DEFAULT_RECOVER_REASON, DEFAULT_WORKFLOW_RUN_LIST_LIMIT, NewWorkflowRun,
    RecoveredWorkflowRun, WorkflowRunFilter, WorkflowRunPatch,
};
// `workflow_step_runs`
pub use crate::steps::StepOutcome;
// The database file and its directory, for `doctor` and the daemon.
pub use crate::daemon::{DatabaseState, INTEGRITY_MAX_PROBLEMS, Integrity, integrity_budget};
pub use crate::secure::check_data_dir;
pub use crate::sqlite::open::{DB_FILE, SCHEMA_VERSION, schema_version};
pub use crate::sqlite::{check_integrity, inspect_database};

/// One connection to a loops database.
///
/// A `Store` is `Send` but not `Sync`: give each thread its own, opened on
/// the same file. SQLite's locking plus the guarded statements make the
/// handles safe to use concurrently, across threads and processes.
pub struct Store {
    /// The backend every operation goes through (see `backend.rs`): SQLite,
    /// the only one so far.
    conn: Sqlite,
    /// The helper of [`Store::flush_wal_early`], joined before the close.
    flusher: Cell<Option<std::thread::JoinHandle<()>>>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(flusher) = self.flusher.take() {
            // Best effort: a failed flush leaves the work to the checkpoint.
            let _ = flusher.join();
        }
        if self.path.is_some() {
            open::close_checkpoint(&self.conn);
        }
    }
}

impl Store {
    /// Opens (creating and migrating if needed) the database file at `path`.
    ///
    /// Missing parent directories are created with mode 0700 and a new
    /// database file with mode 0600. A file that is not a SQLite database,
    /// or that a newer loops wrote, is refused and left untouched, and so
    /// is a data directory or database file another user could change
    /// ([`check_data_dir`], [`StoreError::Unsafe`]). Processes opening a
    /// database at once migrate it one at a time.
    pub fn open(path: &Path, liveness: Arc<dyn Liveness>) -> Result<Store> {
        let conn = Sqlite::open(path, liveness)?;
        Ok(Store {
            flusher: Cell::new(None),
            conn,
            path: Some(path.to_owned()),
        })
    }

    /// Opens `<data_dir>/loops.db`, creating `data_dir` with mode 0700.
    pub fn open_in_dir(data_dir: &Path, liveness: Arc<dyn Liveness>) -> Result<Store> {
        open::create_private_dir(data_dir)?;
        Store::open(&data_dir.join(DB_FILE), liveness)
    }

    /// Opens a private in-memory database (SPEC §4.1 `:memory:`).
    pub fn open_in_memory(liveness: Arc<dyn Liveness>) -> Result<Store> {
        Ok(Store {
            flusher: Cell::new(None),
            conn: Sqlite::open_in_memory(liveness)?,
            path: None,
        })
    }

    /// Starts writing the WAL to disk on a helper thread, when it is long
    /// enough that closing this store will checkpoint it; the checkpoint's
    /// first `fsync` then has little left to write. For a writer that has
    /// made its large writes but still has a while to go before it closes,
    /// such as a workflow runner whose last steps are running.
    ///
    /// Measured on a 50-step workflow run (about 600 KB of WAL): the close's
    /// WAL `fsync` went from about 4.1 to 1.2 ms, and 40 interleaved runs
    /// from a median of 48.1 to 45.2 ms.
    ///
    /// Nothing changes for durability: commits are where they were, and the
    /// checkpoint still syncs the WAL before it copies it. Once a flush has
    /// started, later calls do nothing.
    pub fn flush_wal_early(&self) {
        let Some(path) = &self.path else {
            return;
        };
        if let Some(started) = self.flusher.take() {
            self.flusher.set(Some(started));
            return;
        }
        if !open::wal_needs_checkpoint(&self.conn) {
            return;
        }
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let flusher = std::thread::Builder::new()
            .name("loops-wal-flush".to_owned())
            .spawn(move || {
                // Never through a symbolic link (SQLite itself opens the
                // WAL with `O_NOFOLLOW` too).
                let opened = std::os::unix::fs::OpenOptionsExt::custom_flags(
                    std::fs::OpenOptions::new().read(true),
                    libc::O_NOFOLLOW,
                )
                .open(&wal);
                if let Ok(file) = opened {
                    let _ = file.sync_data();
                }
            });
        // No thread: the checkpoint does all of the writing, as before.
        self.flusher.set(flusher.ok());
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The backend every operation goes through.
    fn backend(&self) -> &dyn Backend {
        &self.conn
    }

    /// Runs `f`, whose store operations all commit together at its end: one
    /// transaction and one WAL append instead of one per operation, for a
    /// runner applying many small results at once.
    ///
    /// Each operation inside stays atomic on its own (a savepoint), and a
    /// failed one does not undo the others: when `f` fails, what succeeded
    /// before the failure is still committed, then its error is returned,
    /// as if the operations had run one by one. Nested batches join the
    /// outer one.
    pub fn batch<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.outer_tx(false, f)
    }

    /// Runs `f` in one write transaction: everything it wrote commits, or
    /// nothing does. When `f` fails, or the commit does, the transaction is
    /// rolled back and the error returned.
    ///
    /// Unlike [`Store::batch`], the operations inside get no savepoint of
    /// their own. A savepoint costs two more statements per operation, a
    /// copy of every page the operation touches and the allocations behind
    /// them: a 50-step workflow run made 109 `brk` calls with savepoints
    /// and makes 11 without. Leaving them out is safe
    /// because an operation that fails with one of its own errors
    /// ([`StoreError::StepNotClaimable`], a not-found) has written nothing:
    /// each transition is a guarded statement that changes nothing when
    /// its guard does not hold, and is checked before anything else is
    /// written. So a caller may handle such an error and go on; any other
    /// error should end `f`, and the rollback undoes all of it.
    ///
    /// The workflow runner applies each turn with it. A nested call joins
    /// the outer transaction.
    pub fn transaction<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.outer_tx(true, f)
    }

    /// [`Store::batch`] (`whole` false: commit what succeeded) or
    /// [`Store::transaction`] (`whole` true: all or nothing).
    fn outer_tx<T, E: From<StoreError>>(
        &self,
        whole: bool,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let db = self.backend();
        if db.in_transaction() {
            return f();
        }
        db.begin()?;
        let out = {
            let _whole = whole.then(|| Whole::enter(db));
            f()
        };
        if !db.in_transaction() {
            // Something inside ended the transaction already.
            return out;
        }
        if whole && out.is_err() {
            db.rollback();
            return out;
        }
        match db.commit() {
            Ok(()) => out,
            Err(e) => {
                db.rollback();
                out.and(Err(e.into()))
            }
        }
    }
}

/// Marks a [`Store::transaction`] as running until dropped, also when `f`
/// panics.
struct Whole<'a>(&'a dyn Backend);

impl<'a> Whole<'a> {
    fn enter(db: &'a dyn Backend) -> Whole<'a> {
        db.set_whole(true);
        Whole(db)
    }
}

impl Drop for Whole<'_> {
    fn drop(&mut self) {
        self.0.set_whole(false);
    }
}

/// Six random bytes for a new id (SPEC §0).
///
/// The bytes come from a per-thread pool that one `getrandom` call fills
/// for [`IDS_PER_FILL`] ids: a workflow run of 50 steps makes about 150
/// ids, one system call each before.
pub(crate) fn random_id_bytes() -> [u8; 6] {
    thread_local! {
        static POOL: std::cell::RefCell<([u8; 6 * IDS_PER_FILL], usize)> =
            const { std::cell::RefCell::new(([0; 6 * IDS_PER_FILL], 6 * IDS_PER_FILL)) };
    }
    POOL.with_borrow_mut(|(bytes, used)| {
        if *used == bytes.len() {
            // getrandom only fails when the OS has no entropy source at
            // all; fall back to the clock and pid so an id is still
            // produced rather than aborting a write.
            if getrandom::fill(bytes).is_err() {
                return clock_id_bytes();
            }
            *used = 0;
        }
        let mut b = [0u8; 6];
        b.copy_from_slice(&bytes[*used..*used + 6]);
        *used += 6;
        b
    })
}

/// Ids drawn from one fill of [`random_id_bytes`]'s pool.
const IDS_PER_FILL: usize = 32;

/// Six bytes from the clock and the pid, when the OS has no randomness.
fn clock_id_bytes() -> [u8; 6] {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mixed = nanos ^ (u128::from(std::process::id()) << 64);
    let mut b = [0u8; 6];
    b.copy_from_slice(&mixed.to_le_bytes()[..6]);
    b
}

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A store on a new database file whose WAL holds `rows` pages of
    /// filler.
    fn store_with_wal(rows: usize) -> (tempfile::TempDir, Store) {
        let dir = open::testing::private_tempdir();
        let store = Store::open_in_dir(dir.path(), Arc::new(|_| false)).unwrap();
        open::testing::fill(&store.conn, rows);
        (dir, store)
    }

    fn frames(dir: &Path) -> i64 {
        open::testing::frames_of(&dir.join(DB_FILE))
    }

    #[test]
    fn an_early_flush_runs_only_for_a_wal_the_close_will_checkpoint() {
        let (_dir, short) = store_with_wal(10);
        short.flush_wal_early();
        assert!(short.flusher.take().is_none(), "a short WAL was flushed");

        let (dir, long) = store_with_wal(120);
        long.flush_wal_early();
        let flusher = long.flusher.take().expect("no flush of a long WAL");
        flusher.join().unwrap();
        drop(long);
        assert_eq!(frames(dir.path()), 1, "the close did not checkpoint");
    }

    #[test]
    fn two_early_flushes_still_end_in_a_close_checkpoint() {
        let (dir, store) = store_with_wal(120);
        store.flush_wal_early();
        store.flush_wal_early();
        // Dropping joins the flush, then checkpoints.
        drop(store);
        assert_eq!(frames(dir.path()), 1);
    }

    #[test]
    fn ids_from_the_pool_differ_across_refills() {
        let ids: std::collections::HashSet<[u8; 6]> = (0..IDS_PER_FILL * 3 + 1)
            .map(|_| random_id_bytes())
            .collect();
        assert_eq!(ids.len(), IDS_PER_FILL * 3 + 1);
    }
}
