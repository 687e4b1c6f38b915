//! The SQLite side of [`crate::daemon`].

use std::path::Path;
use std::time::Duration;

use loops_core::{LoopId, Timestamp};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::backend::WakeOps;
use crate::daemon::{DatabaseState, INTEGRITY_MAX_PROBLEMS, Integrity, NextWake};
use crate::error::{OpenError, Result, StoreError};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::ts;

/// Reads the schema version of the database at `path` without creating,
/// migrating or otherwise writing it (for `doctor`). A file that is not a
/// SQLite database is [`OpenError::NotADatabase`].
pub fn inspect_database(path: &Path) -> Result<DatabaseState, OpenError> {
    if !path.exists() {
        return Ok(DatabaseState::Missing);
    }
    let bad = |e: rusqlite::Error| OpenError::NotADatabase {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(bad)?;
    let has = |table: &str| -> Result<bool, OpenError> {
        conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(bad)
    };
    if !has("refinery_schema_history")? {
        return Ok(DatabaseState::Loops { version: 0 });
    }
    let version: Option<i64> = conn
        .query_row(
            "SELECT MAX(version) FROM refinery_schema_history",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(bad)?
        .flatten();
    Ok(DatabaseState::Loops {
        version: version.unwrap_or(0),
    })
}

/// Runs SQLite's `PRAGMA quick_check` on the database at `path`, read-only,
/// for at most `budget` (see [`integrity_budget`](crate::integrity_budget)):
/// a check that runs out of time is interrupted and reported
/// [`Integrity::Unfinished`]. Damage that stops SQLite from reading the file
/// at all is [`Integrity::Damaged`] too.
pub fn check_integrity(path: &Path, budget: Duration) -> Result<Integrity, OpenError> {
    if !path.exists() {
        return Ok(Integrity::Missing);
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| OpenError::NotADatabase {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let interrupt = conn.get_interrupt_handle();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let timer = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(budget) {
            interrupt.interrupt();
        }
    });
    let checked = (|| -> rusqlite::Result<Vec<String>> {
        let mut stmt = conn.prepare(&format!("PRAGMA quick_check({INTEGRITY_MAX_PROBLEMS})"))?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    })();
    drop(done);
    // The timer ends as soon as `done` is dropped.
    let _ = timer.join();
    match checked {
        Ok(found) if found.len() == 1 && found[0] == "ok" => Ok(Integrity::Ok),
        Ok(found) => Ok(Integrity::Damaged(found)),
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) => {
            Ok(Integrity::Unfinished { budget })
        }
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ) =>
        {
            Ok(Integrity::Damaged(vec![e.to_string()]))
        }
        Err(e) => Err(OpenError::db("checking the database's integrity")(e)),
    }
}

/// The earliest next run of an active loop not excluded (a loop whose run
/// is in flight). SQLite's min/max optimization reads
/// `idx_loops_status_next` from its start and stops at the first loop not
/// excluded, so it reads about as many entries as loops are excluded
/// (`plans::no_frequent_query_grows_with_what_is_stored`).
pub(super) const NEXT_DUE: &str = "SELECT MIN(next_run_at) FROM loops
     WHERE status = 'active' AND next_run_at IS NOT NULL
       AND id NOT IN (SELECT value FROM json_each(?1))";

/// The earliest lease of another daemon's run still to expire: the running
/// runs only (`idx_runs_status_created`).
pub(super) const NEXT_LEASE_EXPIRY: &str = "SELECT MIN(lease_expires_at) FROM loop_runs
     WHERE status = 'running' AND lease_expires_at > ?1
       AND (claimed_by IS NULL OR claimed_by <> ?2)";

/// The next expiry of an active loop: `idx_loops_status_expires` (V5) holds
/// only the loops that have one.
pub(super) const NEXT_EXPIRY: &str =
    "SELECT MIN(expires_at) FROM loops WHERE status = 'active' AND expires_at IS NOT NULL";

impl WakeOps for Sqlite {
    fn next_wake(&self, now: Timestamp, runner_id: &str, exclude: &[LoopId]) -> Result<NextWake> {
        let excluded =
            serde_json::to_string(&exclude.iter().map(LoopId::as_str).collect::<Vec<_>>())
                .map_err(|e| StoreError::Encode(format!("excluded loops: {e}")))?;
        let instant = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<Option<Timestamp>> {
            let value: Option<String> = self
                .conn
                .prepare_cached(sql)
                .and_then(|mut stmt| stmt.query_row(p, |r| r.get(0)))
                .map_err(StoreError::db("computing the next wake-up"))?;
            value
                .map(|v| {
                    v.parse().map_err(|e| StoreError::Corrupt {
                        table: "loops",
                        id: String::new(),
                        reason: format!("stored instant {v:?}: {e}"),
                    })
                })
                .transpose()
        };
        let due = instant(NEXT_DUE, &[&excluded])?;
        let expiry = instant(NEXT_EXPIRY, &[])?;
        let lease_expiry = instant(NEXT_LEASE_EXPIRY, &[&ts(now), &runner_id])?;
        Ok(NextWake {
            due,
            expiry,
            lease_expiry,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity_budget;

    #[test]
    fn the_integrity_budget_is_a_second_plus_10_ms_a_mib() {
        assert_eq!(integrity_budget(0), Duration::from_secs(1));
        assert_eq!(integrity_budget(1024 * 1024 - 1), Duration::from_secs(1));
        assert_eq!(integrity_budget(100 * 1024 * 1024), Duration::from_secs(2));
        assert!(integrity_budget(u64::MAX) > Duration::from_secs(3600));
    }

    #[test]
    fn a_check_past_its_budget_is_interrupted_and_says_unfinished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.db");
        let conn = Connection::open(&path).unwrap();
        // About 64 MiB, which `quick_check` takes far longer than 1 ms to
        // read; indexed, so that it has more to compare.
        conn.execute_batch(
            "CREATE TABLE t (a BLOB, b INTEGER);
             CREATE INDEX t_b ON t (b);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
             INSERT INTO t SELECT randomblob(1024), random() FROM n;",
        )
        .unwrap();
        drop(conn);
        let budget = Duration::from_millis(1);
        assert_eq!(
            check_integrity(&path, budget).unwrap(),
            Integrity::Unfinished { budget }
        );
        // With room to finish, the same file passes.
        assert_eq!(
            check_integrity(&path, Duration::from_secs(600)).unwrap(),
            Integrity::Ok
        );
    }
}
