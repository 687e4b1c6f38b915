//! The store's error types: [`OpenError`] for opening a database,
//! [`StoreError`] for the operations on an open one.
//!
//! No rusqlite type crosses the crate boundary: database failures are carried
//! as [`DbError`], an opaque wrapper, so a PostgreSQL backend can report the
//! same variants.

use std::fmt;
use std::path::PathBuf;

/// An opaque database driver error, from SQLite or PostgreSQL.
#[derive(Debug)]
pub struct DbError(pub(crate) Driver);

/// The driver behind a [`DbError`].
#[derive(Debug)]
pub(crate) enum Driver {
    Sqlite(rusqlite::Error),
    Postgres(postgres::Error),
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> DbError {
        DbError(Driver::Sqlite(e))
    }
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> DbError {
        DbError(Driver::Postgres(e))
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Driver::Sqlite(e) => e.fmt(f),
            // postgres' own Display says only "db error" for a server
            // error; the server's message and code are what a user needs.
            Driver::Postgres(e) => match e.as_db_error() {
                Some(db) => write!(f, "{} (SQLSTATE {})", db.message(), db.code().code()),
                None => e.fmt(f),
            },
        }
    }
}

// No `source()`: the driver's message already says everything its inner
// error would, and a printed chain (`{:#}`) would repeat it.
impl std::error::Error for DbError {}

/// SQLSTATEs after which the same statement may succeed later: a
/// serialization failure or deadlock (retry), a server shutting down or
/// restarting, too many connections, a read-only server after a failover,
/// a cancelled statement (`statement_timeout`), a lock timeout, and disk or
/// memory running out.
const TRANSIENT_SQLSTATES: &[&str] = &[
    "40001", "40P01", "25006", "57P01", "57P02", "57P03", "53300", "53100", "53200", "57014",
    "55P03", "08000", "08003", "08006", "08001", "08004",
];

impl DbError {
    /// The SQLSTATE of a PostgreSQL server error.
    pub(crate) fn sqlstate(&self) -> Option<&str> {
        match &self.0 {
            Driver::Postgres(e) => e.code().map(|c| c.code()),
            Driver::Sqlite(_) => None,
        }
    }

    fn sqlite_code(&self) -> Option<rusqlite::ErrorCode> {
        match &self.0 {
            Driver::Sqlite(e) => e.sqlite_error_code(),
            Driver::Postgres(_) => None,
        }
    }

    /// True when the connection itself is gone (closed by the server, a
    /// network failure): the operation's outcome may be unknown, and the
    /// connection must be opened again.
    pub fn is_connection_lost(&self) -> bool {
        match &self.0 {
            Driver::Postgres(e) => {
                e.is_closed()
                    || (e.code().is_none() && e.as_db_error().is_none())
                    || matches!(
                        e.code().map(|c| c.code()),
                        Some("57P01" | "57P02" | "57P03" | "08000" | "08003" | "08006" | "25006")
                    )
            }
            Driver::Sqlite(_) => false,
        }
    }

    /// True when the database was busy or locked past the busy timeout
    /// (PostgreSQL: a lock timeout).
    pub fn is_busy(&self) -> bool {
        matches!(
            self.sqlite_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        ) || self.sqlstate() == Some("55P03")
    }

    /// True when the failure is the environment's, not the operation's,
    /// so the same write can succeed later: a full disk, an I/O error, a
    /// busy or locked database, a file that cannot be opened for now, or
    /// memory running out; on PostgreSQL also a lost connection, a
    /// serialization failure or deadlock, and a server that became
    /// read-only in a failover.
    pub fn is_transient(&self) -> bool {
        use rusqlite::ErrorCode as C;
        if let Some(state) = self.sqlstate() {
            return TRANSIENT_SQLSTATES.contains(&state);
        }
        if self.is_connection_lost() {
            return true;
        }
        matches!(
            self.sqlite_code(),
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
            self.sqlite_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    }
}

/// Everything opening a database can fail with: preparing and checking
/// the data directory and the database files, connecting to PostgreSQL,
/// checking the schema and migrating it, and the backups taken of the
/// database file. An operation that meets one of these on its way (a
/// PostgreSQL reconnect, a backup before `loops gc --apply`, a store
/// opened for a thread) reports it as [`StoreError::Open`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A database call failed while opening. The driver error is part of
    /// the message rather than a `source`, so a printed chain does not
    /// repeat it.
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
    /// A backup cannot be restored (`loops restore`): it is not a loops
    /// database, it is damaged, a newer loops wrote it, or it changed while
    /// it was copied. The database in place was not changed.
    #[error("cannot restore {path}: {reason}; the database in place was not changed")]
    BadBackup {
        /// The backup.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A PostgreSQL connection string did not parse. The string itself is
    /// not repeated: it may hold a password.
    #[error(
        "the database URL is not a PostgreSQL connection string ({reason}); use \
         postgresql://user@host/dbname, postgresql:///dbname?host=/socket/dir, or \
         key=value pairs such as 'host=/run/postgresql dbname=loops'"
    )]
    BadDatabaseUrl {
        /// What the parser said.
        reason: String,
    },
    /// TLS for a PostgreSQL connection could not be set up: the
    /// `sslrootcert=` file or the system's trusted roots cannot be read.
    #[error(
        "cannot set up TLS for PostgreSQL ({reason}); fix the URL's sslrootcert=, or add sslmode=disable to the URL for a connection that needs none"
    )]
    Tls {
        /// What was wrong.
        reason: String,
    },
    /// The PostgreSQL server's certificate or TLS handshake was refused
    /// (`sslmode`, `sslrootcert`): the connection was not used, and no
    /// password was sent over it.
    #[error("refused the TLS connection to PostgreSQL: {reason}; {fix}")]
    TlsRefused {
        /// What was refused, and why.
        reason: String,
        /// What to do about it.
        fix: &'static str,
    },
    /// Applying the embedded migrations failed.
    #[error("migrating the database failed: {0}")]
    Migration(String),
}

impl OpenError {
    pub(crate) fn db<E: Into<DbError>>(context: &'static str) -> impl FnOnce(E) -> OpenError {
        move |error| OpenError::Db {
            context,
            error: error.into(),
        }
    }

    /// True when the error is a busy or locked database.
    pub fn is_busy(&self) -> bool {
        matches!(self, OpenError::Db { error, .. } if error.is_busy())
    }

    /// True when opening may succeed if tried again later (see
    /// [`DbError::is_transient`]), or a file could not be written or read
    /// for now.
    pub fn is_transient(&self) -> bool {
        match self {
            OpenError::Db { error, .. } => error.is_transient(),
            // A server's certificate may be renewed while a daemon waits,
            // as before, when it was a lost connection.
            OpenError::Io { .. } | OpenError::TlsRefused { .. } => true,
            _ => false,
        }
    }

    /// True when a query found the database file damaged. A file refused
    /// at its first read is [`OpenError::NotADatabase`] instead.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, OpenError::Db { error, .. } if error.is_corrupt())
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
    /// The PostgreSQL connection was lost inside a transaction, which is
    /// gone with it; the next operation connects again.
    #[error(
        "the connection to PostgreSQL was lost in the middle of a transaction; nothing of it was kept"
    )]
    ConnectionLost,
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
    /// Several loops share the name a command was given, so it names no
    /// one loop (issue 16; the original acts on the newest, SPEC §7.1).
    /// Nothing was read or written beyond the lookup.
    #[error(
        "{} loops are named {name:?}: {}; use an id",
        matches.len(),
        describe_matches(matches)
    )]
    AmbiguousName {
        /// The name looked up.
        name: String,
        /// Each loop of that name, newest first: its id and when it was
        /// created.
        matches: Vec<(loops_core::LoopId, loops_core::Timestamp)>,
    },
    /// Input rejected before anything was written.
    #[error(transparent)]
    Invalid(#[from] loops_core::ValidationError),
    /// A schedule could not produce run times.
    #[error(transparent)]
    Schedule(#[from] loops_core::ScheduleError),
    /// An active workflow already has this name.
    #[error(
        "an active workflow named {name:?} already exists; replace it with `loops workflows \
         create <file> --replace`, archive it, or choose another name"
    )]
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
    /// Opening a database, or preparing its files, failed in the middle
    /// of an operation: a PostgreSQL reconnect, a backup, a store opened
    /// for a thread. The message is the [`OpenError`]'s own.
    #[error(transparent)]
    Open(#[from] OpenError),
}

/// The loops of an [`StoreError::AmbiguousName`], the first few in full:
/// `<id> (created <instant>), …`.
fn describe_matches(matches: &[(loops_core::LoopId, loops_core::Timestamp)]) -> String {
    const SHOWN: usize = 5;
    let mut listed: Vec<String> = matches
        .iter()
        .take(SHOWN)
        .map(|(id, created)| format!("{id} (created {created})"))
        .collect();
    if matches.len() > SHOWN {
        listed.push(format!("and {} more", matches.len() - SHOWN));
    }
    listed.join(", ")
}

impl StoreError {
    pub(crate) fn db<E: Into<DbError>>(context: &'static str) -> impl FnOnce(E) -> StoreError {
        move |error| StoreError::Db {
            context,
            error: error.into(),
        }
    }

    /// True when the error is a busy or locked database.
    pub fn is_busy(&self) -> bool {
        self.db_error().is_some_and(DbError::is_busy)
    }

    /// True when the same write may succeed if tried again later (see
    /// [`DbError::is_transient`]), or the file could not be written or
    /// read for now. A runner keeps the result of a run whose finalize
    /// failed this way and tries again until it lands.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Db { error, .. } => error.is_transient(),
            StoreError::ConnectionLost => true,
            StoreError::Open(e) => e.is_transient(),
            _ => false,
        }
    }

    /// True when a query found the database file damaged (SQLite checks
    /// pages only as it reads them, so this can surface long after the
    /// file was opened).
    pub fn is_corrupt(&self) -> bool {
        self.db_error().is_some_and(DbError::is_corrupt)
    }

    /// The driver error of a failed database call, also one made while
    /// opening (a PostgreSQL reconnect).
    pub(crate) fn db_error(&self) -> Option<&DbError> {
        match self {
            StoreError::Db { error, .. } | StoreError::Open(OpenError::Db { error, .. }) => {
                Some(error)
            }
            _ => None,
        }
    }
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: std::ffi::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn an_opening_failure_met_by_an_operation_reads_and_answers_the_same() {
        let io = || OpenError::Io {
            path: PathBuf::from("/data/loops.db"),
            error: std::io::Error::other("disk gone"),
        };
        let busy = || OpenError::db("opening the database")(sqlite(rusqlite::ffi::SQLITE_BUSY));
        let corrupt =
            || OpenError::db("setting synchronous")(sqlite(rusqlite::ffi::SQLITE_CORRUPT));
        let newer = || OpenError::NewerSchema {
            path: PathBuf::from("/data/loops.db"),
            found: 99,
            supported: 9,
        };
        for open in [io, busy, corrupt, newer] {
            let wrapped = StoreError::from(open());
            assert_eq!(wrapped.to_string(), open().to_string());
            assert!(std::error::Error::source(&wrapped).is_none(), "{wrapped}");
            assert_eq!(wrapped.is_transient(), open().is_transient(), "{wrapped}");
            assert_eq!(wrapped.is_busy(), open().is_busy(), "{wrapped}");
            assert_eq!(wrapped.is_corrupt(), open().is_corrupt(), "{wrapped}");
        }
        assert!(io().is_transient() && !io().is_busy());
        assert!(busy().is_transient() && busy().is_busy());
        assert!(corrupt().is_corrupt() && !corrupt().is_transient());
        assert!(!newer().is_transient() && !newer().is_corrupt());
        assert_eq!(
            busy().to_string(),
            StoreError::db("opening the database")(sqlite(rusqlite::ffi::SQLITE_BUSY)).to_string()
        );
    }
}
