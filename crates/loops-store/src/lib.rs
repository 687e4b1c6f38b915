//! Persistence for loops (SPEC §4): one API, [`Store`], over two backends.
//!
//! SQLite is the embedded default: one `loops.db` in the data directory
//! ([`Store::open_in_dir`]), with the original's schema, so its databases
//! open in place. PostgreSQL lets daemons on many hosts share one database
//! ([`Store::open_postgres`]). A [`Store`] is one connection to one
//! database; the scheduler, the workflow runner and the CLI never learn
//! which backend is behind it.
//!
//! Every claim, lease, finalize and state change is a single guarded
//! statement or a single write transaction (`BEGIN IMMEDIATE` on SQLite;
//! the loop's row locked first on PostgreSQL), so two processes sharing a
//! database never double-claim a slot, never lose a finalize, and never
//! strand a loop between a finalized run and its advance (SPEC §9 items
//! 7–12).
//!
//! Every `Store` method goes through the backend seam of `backend.rs`. What
//! an operation decides (a claim, a takeover, an advance, a refusal, a
//! release, a retry) is written once, as pure functions of the rows read
//! and `now`, over a neutral layer also written once: the SQL seam
//! (`sql.rs`, statements with `?N` placeholders, neutral values, rows read
//! by position) and the column descriptions (`columns.rs`). The two thin
//! backends, `sqlite/` and `postgres/`, keep only their connections, their
//! transactions and the statements whose dialects differ (row locks,
//! `SKIP LOCKED`, migrations, gc); neither imports the other.
//!
//! Architecture invariant: this is the only crate that knows SQL, and no
//! driver type (rusqlite's, postgres') appears in its public API (errors
//! wrap them as [`DbError`]). The store does no process work: liveness
//! checks go through the [`Liveness`] it is given.
//!
//! ```
//! use loops_store::Store;
//! let store = Store::open_in_memory(std::sync::Arc::new(|_| false)).unwrap();
//! assert_eq!(store.count_loops(None).unwrap(), 0);
//! ```

mod backend;
mod backup;
mod columns;
mod complete;
mod daemon;
mod error;
mod gc;
mod lease;
mod loops;
mod members;
mod migrations;
mod pools;
mod postgres;
mod runs;
mod schema;
mod secure;
mod sql;
mod sqlite;
mod steps;
#[doc(hidden)]
pub mod testing;
mod transfer;
mod triggers;
mod workflow_runs;
mod workflows;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loops_core::Liveness;

use crate::backend::Backend;
use crate::postgres::Postgres;
use crate::sqlite::{Sqlite, open};

// The public API, by table.
pub use crate::error::{DbError, OpenError, Result, StoreError};
// `loops`
pub use crate::loops::{
    DEFAULT_LOOP_LIMIT, DeleteHistory, DeleteOutcome, LoopChange, LoopEdited, LoopFilter, Refusal,
    loop_settings, loop_to_create,
};
// `loop_runs`
pub use crate::runs::{
    Advance, CancelOutcome, CancelRequest, Claim, DEFAULT_RUN_LIMIT, FAILURE_SAMPLE_CHARS,
    FailureGroup, Fence, Finalized, INTERRUPTED_BY_SHUTDOWN, ManualClaim, NotClaimed,
    OVERLAP_SKIP_REASON, Recovered, Released, RunCost, RunFilter, SkipOutcome,
};
// `daemon_lease`
pub use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
// The daemon's reads across tables.
pub use crate::daemon::{HostRun, NextWake, new_lease_id};
// `daemons`: every daemon registered on the database.
pub use crate::members::DaemonMember;
pub use crate::pools::{PoolInfo, PoolRemoval};
pub use crate::triggers::{LoopTrigger, NewTrigger, TriggerAdded, WatchFired};
// `workflow_specs` and `workflow_events`
pub use crate::workflows::{
    DEFAULT_EVENT_LIST_LIMIT, DEFAULT_WORKFLOW_LIST_LIMIT, WorkflowFilter, WorkflowReplaced,
};
// `workflow_runs`
pub use crate::workflow_runs::{
    DEFAULT_CANCEL_REASON, DEFAULT_RECOVER_REASON, DEFAULT_WORKFLOW_RUN_LIST_LIMIT, NewWorkflowRun,
    RecoveredWorkflowRun, WorkflowRunFilter, WorkflowRunPatch,
};
// `workflow_step_runs`
pub use crate::steps::{StepOutcome, StepStart};
// Retention across the run tables (`loops gc`).
pub use crate::gc::{
    DEFAULT_GC_BATCH, GcBatch, GcCounts, GcCursor, GcLoopTally, GcPolicy, SpaceUsage, Vacuumed,
};
// Moving everything between databases (`loops export`, `loops import`).
pub use crate::transfer::{
    EXPORT_FORMAT, EXPORT_FORMAT_VERSION, EXPORTED_WHILE_RUNNING, ExportOptions, ExportSummary,
    ExportedPool, ExportedRun, ExportedStepRun, ExportedTrigger, IMPORT_BATCH, IMPORT_LISTED,
    ImportFinding, ImportOptions, ImportReport, Table, TableImport, TransferError,
};
// The database file and its directory, for `doctor` and the daemon.
pub use crate::daemon::{DatabaseState, INTEGRITY_MAX_PROBLEMS, Integrity, integrity_budget};
pub use crate::secure::check_data_dir;
// Backups of the database file, in `<data dir>/backups/`.
pub use crate::backup::{
    AUTO_BACKUP_INTERVAL_MS, AutoBackup, BACKUP_DIR, Backup, DEFAULT_BACKUP_KEEP, Kept, Restored,
    Taken, auto_backup, auto_backup_due, backup_dir, list_backups, newest_backup, prune_backups,
    restore_backup, take_backup,
};
pub use crate::schema::{SCHEMA_VERSION, schema_version};
// Shell completion's read-only look at the database.
pub use crate::complete::{
    COMPLETION_BUDGET, COMPLETION_LIMIT, Candidate, CompletionKind, complete_sqlite,
};
pub use crate::sqlite::open::DB_FILE;
// PostgreSQL connection strings.
pub use crate::postgres::listen::Listener;
pub use crate::postgres::{DatabaseUrl, MovedPassword, mask_database_url, move_password};
pub use crate::sqlite::{check_integrity, inspect_database};

/// One connection to a loops database.
///
/// A `Store` is `Send` but not `Sync`: give each thread its own, opened on
/// the same file. SQLite's locking plus the guarded statements make the
/// handles safe to use concurrently, across threads and processes.
pub struct Store {
    /// The backend every operation goes through (see `backend.rs`).
    conn: Db,
    path: Option<PathBuf>,
}

/// The two backends.
enum Db {
    Sqlite(Sqlite),
    // Boxed: its connection configuration is large, and most stores are SQLite.
    Postgres(Box<Postgres>),
}

/// Where a database is: a SQLite file or a PostgreSQL server. A thread
/// that needs a store of its own (a workflow run, the daemon's gc) opens
/// one from the location of the store it was started from.
#[derive(Debug, Clone)]
#[non_exhaustive]
// Made once per thread that opens a store; the size does not matter.
#[expect(clippy::large_enum_variant)]
pub enum Location {
    /// A SQLite database file.
    File(PathBuf),
    /// A PostgreSQL database.
    Postgres {
        /// Its connection string.
        url: DatabaseUrl,
        /// This host's name ([`Store::open_postgres`]).
        host: String,
    },
}

impl Location {
    /// Opens a new store on this location; `role` names the connection on
    /// PostgreSQL (`application_name` `loops:<role>`).
    ///
    /// This is how an operation (a workflow run, a gc pass) gets a store of
    /// its own, so a failure is a [`StoreError::Open`].
    pub fn open(&self, role: &str, liveness: Arc<dyn Liveness>) -> Result<Store> {
        let store = match self {
            Location::File(path) => Store::open(path, liveness),
            Location::Postgres { url, host } => Store::open_postgres(url, role, host, liveness),
        };
        Ok(store?)
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        Location::File(path)
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::File(path.to_owned())
    }
}

/// Which database a [`Store`] is on, for `doctor` and `daemon status`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    /// SQLite: the database file, or `None` in memory.
    Sqlite(Option<PathBuf>),
    /// PostgreSQL: the connection string with its password masked.
    Postgres(String),
}

impl BackendKind {
    /// `sqlite` or `postgresql`.
    pub fn name(&self) -> &'static str {
        match self {
            BackendKind::Sqlite(_) => "sqlite",
            BackendKind::Postgres(_) => "postgresql",
        }
    }

    /// The database: the file (`:memory:` in memory), or the URL with its
    /// password masked.
    pub fn database(&self) -> String {
        match self {
            BackendKind::Sqlite(Some(path)) => path.display().to_string(),
            BackendKind::Sqlite(None) => ":memory:".to_owned(),
            BackendKind::Postgres(shown) => shown.clone(),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name(), self.database())
    }
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
        if let (Db::Sqlite(conn), Some(_)) = (&self.conn, &self.path) {
            conn.close_checkpoint();
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
    /// ([`check_data_dir`], [`OpenError::Unsafe`]). Processes opening a
    /// database at once migrate it one at a time.
    pub fn open(path: &Path, liveness: Arc<dyn Liveness>) -> Result<Store, OpenError> {
        Store::open_with(path, liveness, None).map(|(store, _)| store)
    }

    /// [`Store::open`], and when `backup` is given and the file is an
    /// existing database whose schema a migration is about to change, its
    /// automatic backup first ([`auto_backup`]: at most one an hour, into
    /// `backups/` beside it). Returns the backup when one was taken.
    ///
    /// A failed backup stops the opening before anything is migrated
    /// ([`OpenError::Backup`]). Nothing is read or listed for the backup
    /// when there is nothing to migrate, the common case.
    pub fn open_with(
        path: &Path,
        liveness: Arc<dyn Liveness>,
        backup: Option<AutoBackup>,
    ) -> Result<(Store, Option<Backup>), OpenError> {
        let (conn, taken) = Sqlite::open_with(path, liveness, backup)?;
        let store = Store {
            conn: Db::Sqlite(conn),
            path: Some(path.to_owned()),
        };
        Ok((store, taken))
    }

    /// Opens `<data_dir>/loops.db`, creating `data_dir` with mode 0700.
    pub fn open_in_dir(data_dir: &Path, liveness: Arc<dyn Liveness>) -> Result<Store, OpenError> {
        Store::open_in_dir_with(data_dir, liveness, None).map(|(store, _)| store)
    }

    /// [`Store::open_in_dir`] with the automatic backup of
    /// [`Store::open_with`].
    pub fn open_in_dir_with(
        data_dir: &Path,
        liveness: Arc<dyn Liveness>,
        backup: Option<AutoBackup>,
    ) -> Result<(Store, Option<Backup>), OpenError> {
        open::create_private_dir(data_dir)?;
        Store::open_with(&data_dir.join(DB_FILE), liveness, backup)
    }

    /// Opens a private in-memory database (SPEC §4.1 `:memory:`).
    pub fn open_in_memory(liveness: Arc<dyn Liveness>) -> Result<Store, OpenError> {
        Ok(Store {
            conn: Db::Sqlite(Sqlite::open_in_memory(liveness)?),
            path: None,
        })
    }

    /// Connects to the PostgreSQL database at `url` (migrating it first
    /// when needed, one host at a time), as `role`: what the connection
    /// is for (`cli`, `daemon:<id>`, …), shown in `application_name` as
    /// `loops:<role>`. `host` is this machine's name, the first part of
    /// its runner ids: `liveness` answers only for this host's processes.
    pub fn open_postgres(
        url: &DatabaseUrl,
        role: &str,
        host: &str,
        liveness: Arc<dyn Liveness>,
    ) -> Result<Store, OpenError> {
        Ok(Store {
            conn: Db::Postgres(Box::new(Postgres::open(url, role, host, liveness)?)),
            path: None,
        })
    }

    /// This store on machine `host`, whose name every run it claims records
    /// as its `claimedHost` (issue 25), beside a runner id that may name no
    /// host (`manual-tick:<pid>`).
    ///
    /// On PostgreSQL the host is given at open ([`Store::open_postgres`]),
    /// and it also says whose runs this store's liveness probe may judge;
    /// this replaces it. On SQLite it is only recorded, since every run of
    /// the database is this machine's: a SQLite store opened without a
    /// host records none.
    #[must_use]
    pub fn with_host(mut self, host: &str) -> Store {
        match &mut self.conn {
            Db::Sqlite(sq) => sq.host = Some(host.to_owned()),
            Db::Postgres(pg) => host.clone_into(&mut pg.host),
        }
        self
    }

    /// This store as a runner carrying `labels` beside `host:<host>`
    /// (issue 30, `docs/triggers.md` P1): a loop placed with `runsOn`
    /// is claimed only by a store that carries every one of its labels.
    #[must_use]
    pub fn with_labels(mut self, labels: &[String]) -> Store {
        match &mut self.conn {
            Db::Sqlite(sq) => labels.clone_into(&mut sq.labels),
            Db::Postgres(pg) => labels.clone_into(&mut pg.labels),
        }
        self
    }

    /// The labels this store's claims carry: `host:<host>` when the host
    /// is known, then those of [`Store::with_labels`].
    pub fn labels(&self) -> Vec<String> {
        match &self.conn {
            Db::Sqlite(sq) => sql::Db::labels(sq),
            Db::Postgres(pg) => sql::Db::labels(pg.as_ref()),
        }
    }

    /// Where this store's database is, so another thread can open its own
    /// store on it; `None` in memory.
    pub fn location(&self) -> Option<Location> {
        match &self.conn {
            Db::Sqlite(_) => self.path.clone().map(Location::File),
            Db::Postgres(pg) => Some(Location::Postgres {
                url: pg.url().clone(),
                host: pg.host.clone(),
            }),
        }
    }

    /// On PostgreSQL, starts a thread that calls `on_wake` when another
    /// process, on any host, changes what is due (`pg_notify` in the same
    /// transaction), and once after each reconnect; `on_error` gets a line
    /// when its connection is lost and when it is back. Stops when the
    /// returned [`Listener`] is dropped. `None` on SQLite, whose daemon is
    /// woken through its socket.
    pub fn listen(
        &self,
        role: &str,
        on_wake: Box<dyn Fn() + Send>,
        on_error: Box<dyn Fn(&str) + Send>,
    ) -> Result<Option<Listener>> {
        match &self.conn {
            Db::Sqlite(_) => Ok(None),
            Db::Postgres(pg) => pg.listen(role, on_wake, on_error).map(Some),
        }
    }

    /// Which database this store is on.
    pub fn backend_kind(&self) -> BackendKind {
        match &self.conn {
            Db::Sqlite(_) => BackendKind::Sqlite(self.path.clone()),
            Db::Postgres(pg) => BackendKind::Postgres(pg.shown().to_owned()),
        }
    }

    /// True on PostgreSQL, where daemons on several hosts may share the
    /// database.
    pub fn is_shared(&self) -> bool {
        matches!(self.conn, Db::Postgres(_))
    }

    /// The database server's clock, on PostgreSQL; `None` on SQLite, whose
    /// clock is this host's. Daemons sharing a database plan from it.
    pub fn database_now(&self) -> Result<Option<loops_core::Timestamp>> {
        match &self.conn {
            Db::Sqlite(_) => Ok(None),
            Db::Postgres(pg) => pg.database_now().map(Some),
        }
    }

    /// Creates the data directory with mode 0700 when missing and checks
    /// it as [`check_data_dir`] does. On PostgreSQL it holds no database,
    /// but each host's pid file, wake socket and log.
    pub fn prepare_data_dir(data_dir: &Path) -> Result<(), OpenError> {
        open::create_private_dir(data_dir)?;
        check_data_dir(data_dir).map(drop)
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The backend every operation goes through.
    /// The PostgreSQL backend, for this crate's tests.
    #[cfg(test)]
    pub(crate) fn postgres_backend(&self) -> Option<&Postgres> {
        match &self.conn {
            Db::Postgres(pg) => Some(pg),
            Db::Sqlite(_) => None,
        }
    }

    fn backend(&self) -> &dyn Backend {
        match &self.conn {
            Db::Sqlite(conn) => conn,
            Db::Postgres(conn) => conn.as_ref(),
        }
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
#[expect(
    clippy::disallowed_methods,
    reason = "entropy for an id, not a reading of time"
)]
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

    #[test]
    fn a_listener_wakes_on_notify_and_again_after_its_connection_is_killed() {
        use std::sync::mpsc::{RecvTimeoutError, channel};
        use std::time::Duration;
        let Some(db) = testing::fresh_database("lib::a_listener_wakes_on_notify") else {
            return;
        };
        let url = DatabaseUrl::parse(db.url()).unwrap();
        let store = Store::open_postgres(&url, "test", "host-a", Arc::new(|_| false)).unwrap();
        let (woke, wakes) = channel::<&str>();
        let errors = woke.clone();
        let _listener = store
            .listen(
                "listen-test",
                Box::new(move || {
                    let _ = woke.send("wake");
                }),
                Box::new(move |_| {
                    let _ = errors.send("error");
                }),
            )
            .unwrap()
            .unwrap();
        let mut admin = ::postgres::Client::connect(db.url(), ::postgres::NoTls).unwrap();
        let next = |what: &str| match wakes.recv_timeout(Duration::from_secs(20)) {
            Ok(got) => got,
            Err(RecvTimeoutError::Timeout) => panic!("no {what} within 20 s"),
            Err(e) => panic!("{e}"),
        };
        admin.batch_execute("NOTIFY loops_wake, 'x'").unwrap();
        assert_eq!(next("wake-up"), "wake");
        // One inside the coalescing window is held, not dropped.
        admin.batch_execute("NOTIFY loops_wake, 'x2'").unwrap();
        assert_eq!(next("wake-up held by the window"), "wake");
        admin
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = 'loops:listen-test'",
            )
            .unwrap();
        // Lost, back (one line each), and one wake-up for what was missed.
        let mut seen = vec![
            next("loss"),
            next("return"),
            next("wake-up after the return"),
        ];
        seen.sort_unstable();
        assert_eq!(seen, ["error", "error", "wake"]);
        admin.batch_execute("NOTIFY loops_wake, 'y'").unwrap();
        assert_eq!(next("wake-up on the new connection"), "wake");
    }

    #[test]
    fn a_fresh_postgres_database_migrates_and_a_second_opening_finds_it_migrated() {
        let Some(db) = testing::fresh_database("lib::a_fresh_postgres_database_migrates") else {
            return;
        };
        let url = DatabaseUrl::parse(db.url()).unwrap();
        let store = Store::open_postgres(&url, "test", "host-a", Arc::new(|_| false)).unwrap();
        assert!(store.is_shared());
        assert!(store.database_now().unwrap().is_some());
        let again = Store::open_postgres(&url, "test", "host-a", Arc::new(|_| false)).unwrap();
        assert!(matches!(again.backend_kind(), BackendKind::Postgres(_)));
    }

    #[test]
    fn ids_drawn_in_a_row_differ() {
        let ids: std::collections::HashSet<[u8; 6]> = (0..100).map(|_| random_id_bytes()).collect();
        assert_eq!(ids.len(), 100);
    }
}
