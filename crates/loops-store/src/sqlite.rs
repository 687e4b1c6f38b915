//! The SQLite backend: one connection to one `loops.db`.
//!
//! Every operation is a single guarded statement or a single
//! `BEGIN IMMEDIATE` transaction (see [`Sqlite::write_tx`]), so two
//! processes sharing a database never double-claim a slot, never lose a
//! finalize, and never strand a loop between a finalized run and its
//! advance (SPEC §9 items 7–12). Each table module implements one of the
//! operation traits of [`crate::backend`] for [`Sqlite`]; `rows` decodes
//! rows and `open` opens and migrates files. This is the only part of the
//! crate that knows SQL.

pub(crate) mod backup;
mod busy;
pub(crate) mod complete;
mod daemon;
mod gc;
pub(crate) mod open;
pub(crate) mod rows;
mod runs;
mod sql;

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use loops_core::Liveness;
use rusqlite::Connection;

pub use self::daemon::{check_integrity, inspect_database};
use crate::backend::Transactions;
use crate::backup::{AutoBackup, Backup};
use crate::error::{OpenError, Result, StoreError};

/// The SQLite backend: a connection, whether an all-or-nothing
/// transaction is open on it, and the liveness probe the recovery and
/// claim guards ask.
pub(crate) struct Sqlite {
    conn: Connection,
    /// `<db>-shm`, opened once for [`Store::wal_backlog`](crate::Store::wal_backlog)
    /// and kept open: closing any descriptor of a file drops every POSIX
    /// lock this process holds on it, SQLite's included, and another
    /// process would then take this one's shared memory for abandoned,
    /// truncate it, and this one would die of SIGBUS reading it. Declared
    /// after `conn`, so it is closed after the connection.
    shm: std::cell::OnceCell<std::fs::File>,
    /// Inside a [`Store::transaction`](crate::Store::transaction):
    /// operations run without savepoints.
    whole: Cell<bool>,
    liveness: Arc<dyn Liveness>,
    /// This machine's name, recorded as `claimed_host` with every claim
    /// ([`Store::with_host`](crate::Store::with_host)); `None` records
    /// none. Only recorded: every run of a SQLite database is this
    /// machine's, so no decision reads it.
    pub(crate) host: Option<String>,
    /// The labels this runner carries beside `host:<host>` (issue 30,
    /// [`Store::with_labels`](crate::Store::with_labels)).
    pub(crate) labels: Vec<String>,
}

impl Sqlite {
    /// Checkpoints the WAL of a database file as its last handle closes,
    /// when it has grown enough to be worth it ([`open::close_checkpoint`]).
    pub(crate) fn close_checkpoint(&self) {
        open::close_checkpoint(&self.conn);
    }

    /// Opens (creating and migrating if needed) the database file at
    /// `path`, backing up an existing database with `auto` before a
    /// migration changes its schema (see
    /// [`Store::open_with`](crate::Store::open_with)).
    pub(crate) fn open_with(
        path: &Path,
        liveness: Arc<dyn Liveness>,
        auto: Option<AutoBackup>,
    ) -> Result<(Sqlite, Option<Backup>), OpenError> {
        let (conn, backup) = open::open_file_with(path, auto)?;
        Ok((Sqlite::new(conn, liveness), backup))
    }

    /// Opens a private in-memory database.
    pub(crate) fn open_in_memory(liveness: Arc<dyn Liveness>) -> Result<Sqlite, OpenError> {
        Ok(Sqlite::new(open::open_memory()?, liveness))
    }

    fn new(conn: Connection, liveness: Arc<dyn Liveness>) -> Sqlite {
        Sqlite {
            conn,
            shm: std::cell::OnceCell::new(),
            whole: Cell::new(false),
            liveness,
            host: None,
            labels: Vec::new(),
        }
    }

    /// Runs `f` inside `BEGIN IMMEDIATE … COMMIT`, rolling back on error.
    ///
    /// `BEGIN IMMEDIATE` takes the write lock up front, so the reads inside
    /// `f` see the state its writes are guarded against. Inside a
    /// [`Store::batch`](crate::Store::batch), `f` runs in a savepoint
    /// instead: still all or nothing, committed with the batch. Inside a
    /// [`Store::transaction`](crate::Store::transaction) it runs as it is,
    /// since the whole transaction is all or nothing.
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
}

impl Transactions for Sqlite {
    fn in_transaction(&self) -> bool {
        !self.conn.is_autocommit()
    }

    fn begin(&self) -> Result<()> {
        self.exec_cached("BEGIN IMMEDIATE", "starting a write transaction")
    }

    fn commit(&self) -> Result<()> {
        self.exec_cached("COMMIT", "committing")
    }

    fn rollback(&self) {
        let _ = self.conn.execute_batch("ROLLBACK");
    }

    fn set_whole(&self, whole: bool) {
        self.whole.set(whole);
    }
}

#[cfg(test)]
mod plans;
