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
            conn: open::open_memory()?,
            liveness,
            path: None,
        })
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
    /// their own, which saves statements, page copies and allocations
    /// (`docs/perf.md#one-transaction-per-workflow-turn`). Leaving them out
    /// is safe because an operation that fails with one of its own errors
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
pub(crate) fn random_id_bytes() -> [u8; 6] {
    let mut b = [0u8; 6];
    // getrandom only fails when the OS has no entropy source at all; fall
    // back to the clock and pid so an id is still produced rather than
    // aborting a write.
    match getrandom::fill(&mut b) {
        Ok(()) => b,
        Err(_) => clock_id_bytes(),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_drawn_in_a_row_differ() {
        let ids: std::collections::HashSet<[u8; 6]> = (0..100).map(|_| random_id_bytes()).collect();
        assert_eq!(ids.len(), 100);
    }
}
