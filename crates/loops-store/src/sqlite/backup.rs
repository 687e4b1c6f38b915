//! The SQLite side of [`crate::backup`]: opening a database to copy it,
//! the copy (`VACUUM INTO`), the backup `open.rs` takes before it
//! migrates an existing database, and the checks of a backup's copy
//! before `loops restore` puts it in place ([`check_copy`]).

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::backup::{AutoBackup, BACKUP_DIR, Backup};
use crate::error::{OpenError, Result};
use crate::schema::SCHEMA_VERSION;
use crate::secure::{self, Found};
use crate::sqlite::open::BUSY_TIMEOUT_MS;

/// Opens the existing database at `db` to back it up, after the checks
/// every opening makes (the data directory and the database files must be
/// this user's, and no link is followed at the files), without creating,
/// migrating or writing it.
pub(crate) fn open_source(db: &Path) -> Result<Connection, OpenError> {
    let Some(name) = db.file_name() else {
        return Err(OpenError::Io {
            path: db.to_owned(),
            error: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the database path does not name a file",
            ),
        });
    };
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let missing = |db: &Path| OpenError::Io {
        path: db.to_owned(),
        error: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "there is no database to back up yet",
        ),
    };
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Err(missing(db));
    }
    let db = secure::check_data_dir(dir)?.join(name);
    if let Found::Missing = secure::check_file("database", &db)? {
        return Err(missing(&db));
    }
    for (suffix, what) in [
        ("-wal", "database WAL"),
        ("-shm", "database shared-memory file"),
    ] {
        let mut companion = db.clone().into_os_string();
        companion.push(suffix);
        secure::check_file(what, Path::new(&companion))?;
    }
    // Read-write without CREATE: reading a WAL database may need to create
    // its shared-memory file, and a missing database stays missing.
    let conn = Connection::open_with_flags(
        &db,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(OpenError::db("opening the database to back it up"))?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))
        .map_err(OpenError::db("setting the busy timeout"))?;
    // As every loops connection: the WAL stays as it is when this one
    // closes (see `open::close_checkpoint`).
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .map_err(OpenError::db("keeping the WAL on close"))?;
    Ok(conn)
}

/// Writes a consistent copy of the database of `conn` into `target`, an
/// empty file: `VACUUM INTO` reads the database in one read transaction,
/// so writers go on meanwhile (in WAL mode they never wait for a reader),
/// and a writer in the middle of its commit only makes it wait, within the
/// busy timeout.
pub(crate) fn vacuum_into(conn: &Connection, target: &Path) -> Result<(), OpenError> {
    let Some(target) = target.to_str() else {
        return Err(OpenError::Io {
            path: target.to_owned(),
            error: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "SQLite needs a backup path that is valid UTF-8",
            ),
        });
    };
    conn.execute("VACUUM INTO ?1", [target])
        .map(drop)
        .map_err(OpenError::db("copying the database with VACUUM INTO"))
}

/// The automatic backup of the database of `conn`, in the data directory
/// `dir`, before a migration changes its schema (issue 14): at most one an
/// hour ([`crate::backup::auto_backup_due`]), taken under the migration
/// lock so the processes opening an old database at once take one between
/// them, of the file exactly as it was.
///
/// A failed backup (a full disk, a `backups` another user could change)
/// stops the migration, with an error that names the cause and
/// `LOOPS_SKIP_BACKUP`. Migrating anyway with a warning was the other
/// choice; it was not taken because a migration cannot be undone, and the
/// original's database it changes is exactly what a user going back to
/// the original would want a copy of, while a failing open costs only a
/// retry once the cause is fixed (or the variable is set).
pub(crate) fn before_migrating(
    conn: &Connection,
    dir: &Path,
    auto: AutoBackup,
) -> Result<Option<Backup>, OpenError> {
    let taken = crate::backup::auto_with(
        &dir.join(BACKUP_DIR),
        auto,
        "before migrating its schema",
        |tmp| vacuum_into(conn, tmp),
    )?;
    Ok(taken.map(|t| t.backup))
}

/// The most problems [`check_copy`] quotes from `PRAGMA integrity_check`.
const COPY_PROBLEMS: usize = 5;

/// Checks the copy of a backup at `copy` (a private file nobody else
/// opens) before it is restored (`loops restore`): SQLite's full
/// `PRAGMA integrity_check` finds nothing wrong, it holds the tables of a
/// loops database (the `loops` table, which the original's databases have
/// too), and its schema is not newer than this binary knows, so loops can
/// open it. An older schema is fine: the next opening migrates it.
///
/// `Err` is what is wrong, for [`OpenError::BadBackup`].
pub(crate) fn check_copy(copy: &Path) -> Result<(), String> {
    use rusqlite::ErrorCode as C;
    let said = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(C::NotADatabase) => format!("it is not a SQLite database ({e})"),
        Some(C::DatabaseCorrupt) => format!("it is damaged ({e})"),
        _ => format!("SQLite cannot read it ({e})"),
    };
    let conn = Connection::open_with_flags(
        copy,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(said)?;
    let problems: Vec<String> = conn
        .prepare(&format!("PRAGMA integrity_check({COPY_PROBLEMS})"))
        .and_then(|mut stmt| {
            stmt.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(said)?;
    if problems != ["ok"] {
        return Err(format!(
            "it is damaged (SQLite's integrity check: {})",
            problems.join("; ")
        ));
    }
    let has = |table: &str| -> Result<bool, String> {
        conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(said)
    };
    if !has("loops")? {
        return Err("it is not a loops database (it has no loops table)".to_owned());
    }
    if has("refinery_schema_history")? {
        let version: Option<i64> = conn
            .query_row(
                "SELECT MAX(version) FROM refinery_schema_history",
                [],
                |r| r.get(0),
            )
            .map_err(said)?;
        if let Some(found) = version.filter(|v| *v > SCHEMA_VERSION) {
            return Err(format!(
                "it has schema version {found}, newer than the {SCHEMA_VERSION} this loops \
                 knows; upgrade loops to restore it"
            ));
        }
    }
    Ok(())
}
