//! The store's error type.
//!
//! No rusqlite type crosses the crate boundary: database failures are carried
//! as [`DbError`], an opaque wrapper, so a PostgreSQL backend can report the
//! same variants.

use std::fmt;
use std::path::PathBuf;

/// An opaque database driver error.
#[derive(Debug)]
pub struct DbError(pub(crate) rusqlite::Error);

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// No `source()`: the driver's message already says everything its inner
// error would, and a printed chain (`{:#}`) would repeat it.
impl std::error::Error for DbError {}

impl DbError {
    /// True when the database was busy or locked past the busy timeout.
    pub fn is_busy(&self) -> bool {
        matches!(
            self.0.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }

    /// True when the failure is the environment's, not the operation's,
    /// so the same write can succeed later: a full disk, an I/O error, a
    /// busy or locked database, a file that cannot be opened for now, or
    /// memory running out.
    pub fn is_transient(&self) -> bool {
        use rusqlite::ErrorCode as C;
        matches!(
            self.0.sqlite_error_code(),
            Some(
                C::DiskFull
                    | C::SystemIoFailure
                    | C::DatabaseBusy
                    | C::DatabaseLocked
                    | C::CannotOpen
                    | C::OutOfMemory
                    | C::ReadOnly
            )
        )
    }

    /// True when the database file is damaged (or is not a database).
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self.0.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    }
}

/// Everything a store operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A database call failed. The driver error is part of the message
    /// rather than a `source`, so a printed chain does not repeat it.
    #[error("database error while {context}: {error}")]
    Db {
        /// What the store was doing.
        context: &'static str,
        /// The driver error.
        error: DbError,
    },
    /// The file at the database path is not a SQLite database, or is corrupt.
    /// The file is left untouched.
    #[error(
        "{path} is not a usable loops database ({reason}); it was left untouched. \
         Move it aside or point LOOPS_DATA_DIR at another directory"
    )]
    NotADatabase {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// The database was written by a newer loops whose schema this binary
    /// does not know. Nothing was written.
    #[error(
        "{path} has schema version {found}, newer than the {supported} this loops knows; \
         it was not modified. Upgrade loops to open it"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The schema version found.
        found: i64,
        /// The newest version this binary knows.
        supported: i64,
    },
    /// Creating or securing the data directory or database file failed.
    /// The OS error is part of the message, not a `source`.
    #[error("cannot prepare {path}: {error}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The data directory or a file in it could be changed by another user
    /// (owned by someone else, writable by group or others, or a symbolic
    /// link where loops never follows one). Nothing was opened or changed.
    #[error("refusing {what} {path}: {problem}; {fix}")]
    Unsafe {
        /// `data directory`, `database`, `database WAL`, ...
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// How to fix it.
        fix: String,
    },
    /// The database cannot be opened for writing: the data directory or its
    /// files are read-only. Nothing was written.
    #[error(
        "cannot open {path} ({reason}): the data directory or its files are not writable \
         (loops keeps loops.db-wal and loops.db-shm next to the database); \
         check the permissions of {dir}, or point LOOPS_DATA_DIR at a writable directory"
    )]
    NotWritable {
        /// The database file.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// An automatic backup, taken before a change that cannot be undone
    /// (a migration, `loops gc --apply`), failed, so the change was not
    /// made. The cause is part of the message, not a `source`.
    #[error(
        "could not back up the database into {dir} {before} ({reason}), so nothing was changed; \
         free some space or fix {dir} and try again, or set LOOPS_SKIP_BACKUP=1 to go on \
         without a backup"
    )]
    Backup {
        /// The backups directory.
        dir: PathBuf,
        /// What the backup was for, e.g. `before migrating its schema`.
        before: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// Applying the embedded migrations failed.
    #[error("migrating the database failed: {0}")]
    Migration(String),
    /// A stored row does not decode (bad JSON, unknown enum value).
    #[error("stored {table} row {id} is unreadable: {reason}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The row id.
        id: String,
        /// What was wrong.
        reason: String,
    },
    /// A lookup by id or name found nothing, e.g. `loop not found: nightly`.
    #[error("{kind} not found: {key}")]
    NotFound {
        /// `loop`, `run`, `workflow`, `workflow run`.
        kind: &'static str,
        /// The id or name looked up.
        key: String,
    },
    /// Input rejected before anything was written.
    #[error(transparent)]
    Invalid(#[from] loops_core::ValidationError),
    /// A schedule could not produce run times.
    #[error(transparent)]
    Schedule(#[from] loops_core::ScheduleError),
    /// An active workflow already has this name.
    #[error("an active workflow named {name:?} already exists; archive it or choose another name")]
    DuplicateWorkflowName {
        /// The name.
        name: String,
    },
    /// A workflow step cannot be started in its current state.
    #[error("workflow step is not claimable: {run_id}/{step_id} status={status}")]
    StepNotClaimable {
        /// The workflow run.
        run_id: String,
        /// The step.
        step_id: String,
        /// Its current status.
        status: String,
    },
    /// A workflow step row is missing.
    #[error("workflow step run not found: {run_id}/{step_id}")]
    StepNotFound {
        /// The workflow run.
        run_id: String,
        /// The step.
        step_id: String,
    },
    /// Recovery refused because step processes are alive.
    #[error("cannot recover workflow run while step processes are still alive: {steps}")]
    StepsAlive {
        /// `<stepId> pid=<pid>` entries, comma separated.
        steps: String,
    },
    /// A value could not be encoded for storage (a JSON column).
    #[error("could not encode {0}")]
    Encode(String),
    /// A transition was asked to lead to a state it cannot, such as
    /// finalizing a workflow run as `running`.
    #[error("cannot {action} as {status}")]
    InvalidTransition {
        /// What was asked, e.g. `finalize workflow run`.
        action: &'static str,
        /// The requested status.
        status: String,
    },
    /// A row vanished between a write and the read-back of its result,
    /// e.g. `run not found after finalize: 0123456789ab` (SPEC §4.3).
    #[error("{kind} not found after {op}: {id}")]
    Vanished {
        /// `run`, `loop`.
        kind: &'static str,
        /// The operation, e.g. `finalize`.
        op: &'static str,
        /// The row id.
        id: String,
    },
}

impl StoreError {
    pub(crate) fn db(context: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |error| StoreError::Db {
            context,
            error: DbError(error),
        }
    }

    /// True when the error is a busy or locked database.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Db { error, .. } if error.is_busy())
    }

    /// True when the same write may succeed if tried again later (see
    /// [`DbError::is_transient`]), or the file could not be written or
    /// read for now. A runner keeps the result of a run whose finalize
    /// failed this way and tries again until it lands.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Db { error, .. } => error.is_transient(),
            StoreError::Io { .. } => true,
            _ => false,
        }
    }

    /// True when a query found the database file damaged (SQLite checks
    /// pages only as it reads them, so this can surface long after the
    /// file was opened).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, StoreError::Db { error, .. } if error.is_corrupt())
    }
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
