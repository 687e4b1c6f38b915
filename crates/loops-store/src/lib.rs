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
//! so a PostgreSQL backend can implement the same operations later.
//! The store does no process work: liveness checks go through the
//! [`Liveness`] it is given.
//!
//! ```
//! use loops_store::Store;
//! let store = Store::open_in_memory(std::sync::Arc::new(|_| false)).unwrap();
//! assert_eq!(store.count_loops(None).unwrap(), 0);
//! ```

mod daemon;
mod error;
mod lease;
mod loops;
mod open;
mod rows;
mod runs;
mod secure;
mod steps;
mod workflow_runs;
mod workflows;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loops_core::Liveness;
use rusqlite::Connection;

pub use crate::daemon::*;
pub use crate::error::{DbError, Result, StoreError};
pub use crate::lease::*;
pub use crate::loops::*;
pub use crate::open::{DB_FILE, SCHEMA_VERSION, schema_version};
pub use crate::runs::*;
pub use crate::secure::check_data_dir;
pub use crate::steps::*;
pub use crate::workflow_runs::*;
pub use crate::workflows::*;

/// One connection to a loops database.
///
/// A `Store` is `Send` but not `Sync`: give each thread its own, opened on
/// the same file. SQLite's locking plus the guarded statements make the
/// handles safe to use concurrently, across threads and processes.
pub struct Store {
    conn: Connection,
    /// Inside a [`Store::transaction`]: operations run without savepoints.
    whole: Cell<bool>,
    /// The helper of [`Store::flush_wal_early`], joined before the close.
    flusher: Cell<Option<std::thread::JoinHandle<()>>>,
    liveness: Arc<dyn Liveness>,
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
        let conn = open::open_file(path)?;
        Ok(Store {
            whole: Cell::new(false),
            flusher: Cell::new(None),
            conn,
            liveness,
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
            whole: Cell::new(false),
            flusher: Cell::new(None),
            conn: open::open_memory()?,
            liveness,
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

    /// Runs `f` inside `BEGIN IMMEDIATE … COMMIT`, rolling back on error.
    ///
    /// `BEGIN IMMEDIATE` takes the write lock up front, so the reads inside
    /// `f` see the state its writes are guarded against. Inside a
    /// [`Store::batch`], `f` runs in a savepoint instead: still all or
    /// nothing, committed with the batch. Inside a [`Store::transaction`]
    /// it runs as it is, since the whole transaction is all or nothing.
    pub(crate) fn write_tx<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            if self.whole.get() {
                return f(&self.conn);
            }
            return self.savepoint(f);
        }
        self.exec_cached("BEGIN IMMEDIATE", "starting a write transaction")?;
        let out = f(&self.conn).and_then(|v| {
            self.exec_cached("COMMIT", "committing")?;
            Ok(v)
        });
        if out.is_err() && !self.conn.is_autocommit() {
            // The transaction is already failing; a rollback error adds nothing.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        out
    }

    fn savepoint<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.exec_cached("SAVEPOINT write_tx", "starting a savepoint")?;
        match f(&self.conn) {
            Ok(v) => {
                self.exec_cached("RELEASE write_tx", "releasing a savepoint")?;
                Ok(v)
            }
            Err(e) => {
                // Undo this operation only; the batch goes on.
                let _ = self
                    .conn
                    .execute_batch("ROLLBACK TO write_tx; RELEASE write_tx");
                Err(e)
            }
        }
    }

    /// Cached: BEGIN and COMMIT run for every write, and re-parsing them
    /// each time showed up in profiles.
    fn exec_cached(&self, sql: &str, context: &'static str) -> Result<()> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute([]))
            .map(drop)
            .map_err(StoreError::db(context))
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
        if !self.conn.is_autocommit() {
            return f();
        }
        self.exec_cached("BEGIN IMMEDIATE", "starting a write transaction")?;
        let out = {
            let _whole = whole.then(|| Whole::enter(&self.whole));
            f()
        };
        if self.conn.is_autocommit() {
            // Something inside ended the transaction already.
            return out;
        }
        if whole && out.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
            return out;
        }
        match self.exec_cached("COMMIT", "committing") {
            Ok(()) => out,
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                out.and(Err(e.into()))
            }
        }
    }
}

/// Marks a [`Store::transaction`] as running until dropped, also when `f`
/// panics.
struct Whole<'a>(&'a Cell<bool>);

impl<'a> Whole<'a> {
    fn enter(flag: &'a Cell<bool>) -> Whole<'a> {
        flag.set(true);
        Whole(flag)
    }
}

impl Drop for Whole<'_> {
    fn drop(&mut self) {
        self.0.set(false);
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
