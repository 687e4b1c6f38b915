//! Opening a database: files and permissions, pragmas, the newer-schema
//! guard and the embedded migrations, applied one process at a time
//! (SPEC §4.1).

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::backup::{AutoBackup, Backup};
use crate::error::{OpenError, Result};
use crate::migrations::{self, Applied};
use crate::schema::SCHEMA_VERSION;

/// The file name of the database inside the data directory.
pub const DB_FILE: &str = "loops.db";

/// How long a statement waits for a competing writer (SPEC §4.1).
pub(crate) const BUSY_TIMEOUT_MS: u64 = 5000;

/// Prepared statements kept per connection: more than the store has.
const STATEMENT_CACHE: usize = 128;

/// A closing connection checkpoints the WAL once it holds more frames than
/// this ([`close_checkpoint`]): 96 frames of 4 KiB pages are 384 KiB, near
/// the measured balance between a checkpoint's `fsync`s and the WAL replay
/// of the next process to open the database
/// (`docs/perf.md#wal-close-checkpoint`).
const WAL_CLOSE_CHECKPOINT_FRAMES: i64 = 96;

/// The size the WAL file is cut back to when it is reused after a
/// checkpoint, if it grew past it (`journal_size_limit`): the 1,000 pages
/// after which SQLite checkpoints on its own.
const WAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// What a closing connection does with the WAL.
///
/// SQLite's own close (the last connection checkpoints the WAL, then deletes
/// it and the shared-memory file) was most of a short command's cost.
/// Connections are therefore opened with `NO_CKPT_ON_CLOSE`, and a
/// closing connection checkpoints only a WAL that holds more than
/// [`WAL_CLOSE_CHECKPOINT_FRAMES`] frames, so the next process does not
/// replay it. The next process to open the file rebuilds the WAL index from
/// what is left, which is at most that much. Nothing is less durable: a
/// commit is in the WAL either way, and WAL frames survive a crash.
///
/// The checkpoint is a `RESTART`, followed by a write that starts the WAL
/// over from its first frame: it rewrites the `user_version` the database
/// already has. The file keeps its length and its blocks, and the next
/// process reads one valid frame from it. `TRUNCATE` would free the blocks
/// instead, which costs this close and every later append
/// (`docs/perf.md#wal-close-checkpoint`).
pub(crate) fn close_checkpoint(conn: &Connection) {
    if !wal_needs_checkpoint(conn) {
        return;
    }
    // Busy (a reader or writer elsewhere) is fine: a later close, or the
    // daemon's automatic checkpoints, will do it. So the checkpoint does
    // not wait for readers to leave the WAL, which `RESTART` would
    // otherwise do for the whole busy timeout.
    let _ = conn.busy_timeout(std::time::Duration::ZERO);
    let done = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    if let Ok((0, log, copied)) = done
        && log == copied
        && let Ok(version) = conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
    {
        // The first write after a complete checkpoint starts the WAL over.
        let _ = conn.execute_batch(&format!("PRAGMA user_version = {version}"));
    }
}

/// Whether the WAL holds more than [`WAL_CLOSE_CHECKPOINT_FRAMES`] frames,
/// so that [`close_checkpoint`] will checkpoint it.
pub(crate) fn wal_needs_checkpoint(conn: &Connection) -> bool {
    wal_frames(conn).is_some_and(|n| n > WAL_CLOSE_CHECKPOINT_FRAMES)
}

/// The WAL's valid frames: `NOOP` only reads the WAL's header, so this is
/// not the file's length, which a restarted WAL keeps.
pub(crate) fn wal_frames(conn: &Connection) -> Option<i64> {
    conn.query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| r.get(1))
        .ok()
}

/// Helpers for the tests of this crate that look at the WAL.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use rusqlite::Connection;

    /// Appends `rows` pages of filler to the database of `conn`.
    pub(crate) fn fill(conn: &Connection, rows: usize) {
        conn.execute_batch("CREATE TABLE IF NOT EXISTS filler (x BLOB)")
            .unwrap();
        for _ in 0..rows {
            conn.execute("INSERT INTO filler VALUES (zeroblob(4000))", [])
                .unwrap();
        }
    }

    /// The WAL's valid frames of the database at `db`, as another process
    /// opening it sees them.
    pub(crate) fn frames_of(db: &Path) -> i64 {
        super::wal_frames(&super::open_file(db).unwrap()).unwrap()
    }

    /// A new temporary directory to use as a data directory: 0700 whatever
    /// the umask, as loops makes its own (it refuses one that group or
    /// others can write).
    pub(crate) fn private_tempdir() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap()
    }
}

/// Creates `dir` (and parents) with mode 0700 when missing.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), OpenError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| {
            // Something is in the way (a file, a dangling link): say what,
            // when the data directory check can.
            match crate::secure::check_data_dir(dir) {
                Err(refused @ OpenError::Unsafe { .. }) => refused,
                _ => OpenError::Io {
                    path: dir.to_owned(),
                    error,
                },
            }
        })
}

/// [`open_file_with`] without a backup, for this crate's tests.
#[cfg(test)]
pub(crate) fn open_file(path: &Path) -> Result<Connection, OpenError> {
    open_file_with(path, None).map(|(conn, _)| conn)
}

/// Opens (creating if needed) the database at `path` and migrates it,
/// after the automatic backup `auto` (when given) of an existing database
/// whose schema the migration changes; returns the backup when one was
/// taken.
///
/// The data directory (`path`'s parent) is created 0700 when missing, and
/// it and the database files must pass [`crate::secure`]'s checks before
/// SQLite opens anything. A data directory that is a symbolic link is
/// resolved once, and the database is opened in its target.
pub(crate) fn open_file_with(
    path: &Path,
    auto: Option<AutoBackup>,
) -> Result<(Connection, Option<Backup>), OpenError> {
    let path = &secure_database(path)?;
    let conn = Connection::open_with_flags(
        path,
        // NOFOLLOW: SQLite refuses a link at the path itself, closing the
        // window between the `lstat` check and this open.
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| not_a_database(path, e))?;
    prepare(conn, Some(path), auto)
}

/// The directory of the database file `path` (`.` for a bare file name).
fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Creates the data directory of `path` when missing and checks it, checks
/// the database and its `-wal` and `-shm`, and creates the database 0600
/// when missing. Returns the path to open: `path`, or the same file in the
/// resolved directory when the directory is a symbolic link.
fn secure_database(path: &Path) -> Result<PathBuf, OpenError> {
    let Some(name) = path.file_name() else {
        return Err(OpenError::Io {
            path: path.to_owned(),
            error: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the database path does not name a file",
            ),
        });
    };
    let dir = dir_of(path);
    create_private_dir(dir)?;
    let resolved = crate::secure::check_data_dir(dir)?;
    let db = if resolved == dir {
        path.to_owned()
    } else {
        resolved.join(name)
    };
    crate::secure::create_private_file("database", &db)?;
    for (suffix, what) in [
        ("-wal", "database WAL"),
        ("-shm", "database shared-memory file"),
    ] {
        let mut companion = db.clone().into_os_string();
        companion.push(suffix);
        crate::secure::check_file(what, Path::new(&companion))?;
    }
    Ok(db)
}

/// Opens a private in-memory database.
pub(crate) fn open_memory() -> Result<Connection, OpenError> {
    let conn = Connection::open_in_memory().map_err(OpenError::db("opening :memory:"))?;
    prepare(conn, None, None).map(|(conn, _)| conn)
}

/// The error of a failed first read: a file that is not a database (or
/// is damaged) is refused as such; a file SQLite cannot open for writing
/// (a read-only data directory, where even a read must create the WAL's
/// shared-memory file) is reported as not writable, not as corrupt; the
/// rest are plain database errors.
fn not_a_database(path: &Path, e: rusqlite::Error) -> OpenError {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::NotADatabase | C::DatabaseCorrupt) => OpenError::NotADatabase {
            path: path.to_owned(),
            reason: e.to_string(),
        },
        Some(C::CannotOpen | C::ReadOnly | C::PermissionDenied) => OpenError::NotWritable {
            path: path.to_owned(),
            dir: path
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_owned),
            reason: e.to_string(),
        },
        _ => OpenError::db("opening the database")(e),
    }
}

/// Checks the file is a database of a schema we know, then sets the pragmas
/// and migrates, after the automatic backup `auto` of a database that
/// already has a schema. Nothing is written before both checks pass.
fn prepare(
    mut conn: Connection,
    path: Option<&Path>,
    auto: Option<AutoBackup>,
) -> Result<(Connection, Option<Backup>), OpenError> {
    let shown: PathBuf = path.map_or_else(|| PathBuf::from(":memory:"), Path::to_owned);
    conn.busy_handler(Some(super::busy::wait_for_the_lock))
        .map_err(OpenError::db("setting the busy timeout"))?;
    // rusqlite keeps 16 prepared statements by default; a workflow run
    // cycles through more than that for every step, and re-preparing the
    // evicted ones was most of its statement preparation.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // The bundled SQLite enables foreign keys by default; the original never
    // did (SPEC §4.1), and its databases may hold rows that the REFERENCES
    // clauses would reject. History is kept consistent by the operations
    // themselves instead.
    conn.pragma_update(None, "foreign_keys", "OFF")
        .map_err(OpenError::db("disabling foreign keys"))?;
    // The query planner stability guarantee: a plan does not depend on the
    // values bound to it. Without it, every statement whose parameters are
    // compared with a partial index's condition (the workflow indexes) is
    // re-prepared each time its bound values change, which was a sixth of
    // the CPU of running a workflow. Stable plans also suit a long-running
    // scheduler better than plans that shift with the data.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(OpenError::db("enabling stable query plans"))?;

    // Reading the schema is the first access to the file: a non-SQLite or
    // corrupt file fails here, before any write.
    let found = schema_found(&conn, &shown)?;
    if found == Some(SCHEMA_VERSION) {
        // The common path: nothing to migrate, so no lock to take.
        if path.is_some() {
            set_file_pragmas(&conn, &shown)?;
        }
        return Ok((conn, None));
    }

    // Migrating: one process at a time, and each one checks again, inside
    // the lock, whether another migrated the file while it waited. Without
    // the lock, processes opening a new or older database at once applied
    // the same migration twice (`UNIQUE constraint failed:
    // refinery_schema_history.version`, `duplicate column name`).
    let Some(path) = path else {
        migrate(&mut conn)?;
        return Ok((conn, None));
    };
    let _lock = MigrationLock::acquire(dir_of(path))?;
    let found = schema_found(&conn, &shown)?;
    // Before anything is written: the backup is the file as it was.
    let backup = match auto {
        Some(auto) if found != Some(SCHEMA_VERSION) && has_schema(&conn, &shown)? => {
            super::backup::before_migrating(&conn, dir_of(path), auto)?
        }
        _ => None,
    };
    // A new file becomes WAL here, under the lock too: switching the
    // journal mode needs an exclusive lock of the file, which every
    // process opening it at once would otherwise compete for.
    set_file_pragmas(&conn, &shown)?;
    if found != Some(SCHEMA_VERSION) {
        migrate(&mut conn)?;
        // A migration rewrote much of the file (a new database's WAL
        // holds its whole schema): checkpoint it now, once, rather
        // than have every later command replay it.
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
    Ok((conn, backup))
}

/// Whether the database has a schema at all: one the original or an older
/// loops wrote, not a new, empty file, which has nothing to back up.
fn has_schema(conn: &Connection, shown: &Path) -> Result<bool, OpenError> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master)", [], |r| {
        r.get(0)
    })
    .map_err(|e| not_a_database(shown, e))
}

/// The schema version the database records (`None`: no loops schema, as
/// in a new file or one the original wrote), refusing one newer than this
/// binary knows.
fn schema_found(conn: &Connection, shown: &Path) -> Result<Option<i64>, OpenError> {
    let history: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'refinery_schema_history'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(|e| not_a_database(shown, e))?;
    if !history {
        return Ok(None);
    }
    let found: Option<i64> = conn
        .query_row(
            "SELECT MAX(version) FROM refinery_schema_history",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| not_a_database(shown, e))?
        .flatten();
    if let Some(found) = found.filter(|f| *f > SCHEMA_VERSION) {
        return Err(OpenError::NewerSchema {
            path: shown.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(found)
}

/// WAL and what goes with it, for a database file.
fn set_file_pragmas(conn: &Connection, shown: &Path) -> Result<(), OpenError> {
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| not_a_database(shown, e))?;
    // WAL with NORMAL sync is durable across application crashes, which
    // is what a scheduler needs; a power loss may drop the last commits
    // but never corrupts the file.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(OpenError::db("setting synchronous"))?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .map_err(OpenError::db("keeping the WAL on close"))?;
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
        .map_err(OpenError::db("limiting the WAL's size"))?;
    Ok(())
}

/// Brings a database that is not at [`SCHEMA_VERSION`] (and not newer) to
/// it: each migration [`migrations::plan`] returns, with its history row,
/// in a transaction of its own.
fn migrate(conn: &mut Connection) -> Result<(), OpenError> {
    upgrade_pre_0_3(conn)?;
    conn.execute_batch(migrations::CREATE_HISTORY)
        .map_err(OpenError::db("creating the migration history"))?;
    let applied = read_history(conn).map_err(OpenError::db("reading the migration history"))?;
    for migration in migrations::plan(&applied, migrations::SQLITE).map_err(OpenError::Migration)? {
        let failed = |e: rusqlite::Error| {
            OpenError::Migration(format!(
                "applying V{}__{}: {e}",
                migration.version, migration.name
            ))
        };
        // `BEGIN IMMEDIATE` takes the write lock up front, so a writer
        // outside the migration lock (the original, run side by side)
        // makes it wait out the busy timeout instead of failing at once on
        // a stale read.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(failed)?;
        tx.execute_batch(migration.sql).map_err(failed)?;
        tx.execute(
            migrations::INSERT_HISTORY,
            rusqlite::params![
                migration.version,
                migration.name,
                migrations::applied_on(),
                migration.checksum().to_string()
            ],
        )
        .map_err(failed)?;
        tx.commit().map_err(failed)?;
    }
    Ok(())
}

/// `refinery_schema_history`, oldest first.
fn read_history(conn: &Connection) -> rusqlite::Result<Vec<Applied>> {
    let mut stmt = conn.prepare(migrations::READ_HISTORY)?;
    let rows = stmt.query_map([], |r| {
        Ok(Applied {
            version: r.get(0)?,
            name: r.get(1)?,
            checksum: r.get(2)?,
        })
    })?;
    rows.collect()
}

/// How long opening waits for another process's migration of the same
/// database: each of its statements may wait out the busy timeout.
const MIGRATION_LOCK_WAIT: std::time::Duration =
    std::time::Duration::from_millis(6 * BUSY_TIMEOUT_MS);

/// The lock that makes migrating a database file one process at a time:
/// an exclusive `flock` of its directory, released when dropped.
///
/// The directory, not the database: closing any descriptor of the database
/// file would drop the POSIX locks SQLite holds on it in this process, and
/// a lock file would be one more file in the data directory. `flock` locks
/// and SQLite's `fcntl` locks do not interact. The directory was checked
/// and resolved before ([`secure_database`]) and is opened with
/// `O_NOFOLLOW`.
struct MigrationLock(Option<std::fs::File>);

impl MigrationLock {
    /// Waits for the lock of `dir`, at most [`MIGRATION_LOCK_WAIT`]. Where
    /// the file system has no `flock` (some network file systems),
    /// migrating goes on without it, as it did before the lock existed.
    fn acquire(dir: &Path) -> Result<MigrationLock, OpenError> {
        use std::fs::TryLockError;
        let io = |error| OpenError::Io {
            path: dir.to_owned(),
            error,
        };
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(dir)
            .map_err(io)?;
        // Polled like SQLite's busy handler, so a process stopped while it
        // held the lock (a suspended terminal) costs a clear error, not a
        // command that never returns.
        let deadline = std::time::Instant::now() + MIGRATION_LOCK_WAIT;
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(MigrationLock(Some(file))),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(TryLockError::Error(e))
                    if e.kind() == std::io::ErrorKind::Unsupported
                        || e.raw_os_error() == Some(libc::ENOLCK)
                        || e.raw_os_error() == Some(libc::EOPNOTSUPP) =>
                {
                    return Ok(MigrationLock(None));
                }
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "another loops process has been migrating the database for over {}s; \
                         try again once it is done",
                        MIGRATION_LOCK_WAIT.as_secs()
                    ),
                )));
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for MigrationLock {
    fn drop(&mut self) {
        if let Some(file) = self.0.take() {
            // Closing the descriptor releases the lock too.
            let _ = file.unlock();
        }
    }
}

/// Databases from before 0.3 lack `workflow_step_runs.pid` (SPEC §4.1 step
/// 2). The embedded migration creates tables only when missing, so the
/// column is added here when the table exists without it.
fn upgrade_pre_0_3(conn: &Connection) -> Result<(), OpenError> {
    let has_table: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'workflow_step_runs'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(OpenError::db("inspecting the schema"))?;
    if !has_table {
        return Ok(());
    }
    let has_pid: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM pragma_table_info('workflow_step_runs') WHERE name = 'pid'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(OpenError::db("inspecting the schema"))?;
    if !has_pid {
        conn.execute("ALTER TABLE workflow_step_runs ADD COLUMN pid INTEGER", [])
            .map_err(OpenError::db("adding workflow_step_runs.pid"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::testing::{fill, frames_of as wal_frames, private_tempdir};
    use super::*;

    #[test]
    fn a_write_waits_for_another_connections_lock() {
        let dir = private_tempdir();
        let db = dir.path().join(DB_FILE);
        let conn = open_file(&db).unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        let other = Connection::open(&db).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let (locked, release) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            // Holds the lock until the writer has certainly tried once.
            let _ = release.recv_timeout(std::time::Duration::from_millis(50));
            other.execute_batch("COMMIT").unwrap();
        });
        conn.execute("INSERT INTO t VALUES (1)", [])
            .expect("the write waits for the lock instead of failing");
        drop(locked);
        holder.join().unwrap();
    }

    fn wal_len(db: &Path) -> u64 {
        std::fs::metadata(format!("{}-wal", db.display())).map_or(0, |m| m.len())
    }

    /// A new database whose connection has written about 400 KiB of WAL.
    fn long_wal() -> (tempfile::TempDir, PathBuf, Connection) {
        let dir = private_tempdir();
        let db = dir.path().join(DB_FILE);
        let conn = open_file(&db).unwrap();
        fill(&conn, 100);
        assert!(wal_frames(&db) > WAL_CLOSE_CHECKPOINT_FRAMES);
        (dir, db, conn)
    }

    #[test]
    fn a_closing_connection_checkpoints_a_long_wal_and_starts_it_over() {
        let (_dir, db, conn) = long_wal();
        let len = wal_len(&db);
        close_checkpoint(&conn);
        assert_eq!(wal_frames(&db), 1, "the WAL was not started over");
        assert_eq!(wal_len(&db), len, "the WAL file was cut");
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM filler", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 100);
        // Short again: the next close leaves it alone.
        close_checkpoint(&conn);
        assert_eq!(wal_frames(&db), 1);
    }

    #[test]
    fn a_closing_connection_leaves_a_short_wal() {
        let dir = private_tempdir();
        let db = dir.path().join(DB_FILE);
        let conn = open_file(&db).unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let frames = wal_frames(&db);
        assert!(frames > 0);
        close_checkpoint(&conn);
        assert_eq!(wal_frames(&db), frames);
    }

    #[test]
    fn a_closing_connection_does_not_wait_for_a_reader() {
        let (_dir, db, conn) = long_wal();
        // Another connection reads from the WAL: RESTART cannot finish,
        // and must give up at once rather than wait out the busy timeout.
        let reader = open_file(&db).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM filler;")
            .unwrap();
        let frames = wal_frames(&db);
        let started = std::time::Instant::now();
        close_checkpoint(&conn);
        let waited = started.elapsed();
        assert!(
            waited < std::time::Duration::from_millis(BUSY_TIMEOUT_MS / 2),
            "the close waited {waited:?} for the reader"
        );
        assert_eq!(wal_frames(&db), frames, "the reader's WAL was restarted");
        reader.execute_batch("COMMIT").unwrap();
    }
}
