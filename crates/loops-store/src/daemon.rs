//! What the daemon asks the database beyond SPEC §4.3: when it next has
//! work ([`Store::next_wake`], SPEC §9 item 6), which runs a dead daemon of
//! this host left behind ([`Store::running_runs_of_host`], §9 items 16 and
//! 18), and, for `doctor`, the schema version of a database file without
//! opening it for writing ([`inspect_database`], §9 item 31) and whether
//! the file is damaged ([`check_integrity`]).
//!
//! All of these only read.

use std::path::Path;
use std::time::Duration;

use loops_core::{LoopId, LoopRun, ProcessRef, RunId, Timestamp};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::Store;
use crate::error::{Result, StoreError};
use crate::rows::{self, ts};
use crate::runs::run_and_process;
use crate::workflows::linked_step_processes;

/// The instants at which the database next asks something of a daemon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NextWake {
    /// The earliest `next_run_at` of an active loop that is not excluded: a
    /// slot or a retry coming due.
    pub due: Option<Timestamp>,
    /// The earliest `expires_at` of an active loop.
    pub expiry: Option<Timestamp>,
    /// The earliest lease, after `now`, of a running run that another runner
    /// holds: when that runner may need recovering.
    pub lease_expiry: Option<Timestamp>,
}

impl NextWake {
    /// The earliest of the three, if any.
    pub fn earliest(&self) -> Option<Timestamp> {
        [self.due, self.expiry, self.lease_expiry]
            .into_iter()
            .flatten()
            .min()
    }
}

/// A running run claimed on this host, with its recorded process.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRun {
    /// The run.
    pub run: LoopRun,
    /// Its recorded child process, if one was spawned.
    pub process: Option<ProcessRef>,
    /// The spawn id its processes carry in `LOOPS_SPAWN_ID`, when the
    /// runner recorded one (see [`Store::mark_run_spawn`]).
    pub spawn_id: Option<String>,
}

/// What [`inspect_database`] found at a database path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseState {
    /// No file yet; the first command creates it.
    Missing,
    /// A loops database. `version` is its newest applied migration, 0 for a
    /// database the original wrote (which has no migration history).
    Loops {
        /// The schema version of the file.
        version: i64,
    },
}

/// Reads the schema version of the database at `path` without creating,
/// migrating or otherwise writing it (for `doctor`). A file that is not a
/// SQLite database is [`StoreError::NotADatabase`].
pub fn inspect_database(path: &Path) -> Result<DatabaseState> {
    if !path.exists() {
        return Ok(DatabaseState::Missing);
    }
    let bad = |e: rusqlite::Error| StoreError::NotADatabase {
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
    let has = |table: &str| -> Result<bool> {
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

/// What [`check_integrity`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// No file yet: nothing to check.
    Missing,
    /// `PRAGMA quick_check` found nothing wrong.
    Ok,
    /// The check found damage: SQLite's own descriptions, at most
    /// [`INTEGRITY_MAX_PROBLEMS`] of them.
    Damaged(Vec<String>),
    /// The check did not finish within its time budget; nothing is known.
    Unfinished {
        /// The budget it ran out of.
        budget: Duration,
    },
}

/// The most problems [`check_integrity`] reports.
pub const INTEGRITY_MAX_PROBLEMS: usize = 20;

/// The time [`check_integrity`] allows itself: one second, plus 10 ms for
/// every MiB of the database (a quick check reads every page once, and
/// disks read well over 100 MiB a second).
pub fn integrity_budget(bytes: u64) -> Duration {
    Duration::from_secs(1)
        + Duration::from_millis(10)
            .saturating_mul(u32::try_from(bytes / (1024 * 1024)).unwrap_or(u32::MAX))
}

/// Runs SQLite's `PRAGMA quick_check` on the database at `path`, read-only,
/// for at most `budget` (see [`integrity_budget`]): a check that runs out of
/// time is interrupted and reported [`Integrity::Unfinished`]. Damage that
/// stops SQLite from reading the file at all is [`Integrity::Damaged`] too.
pub fn check_integrity(path: &Path, budget: Duration) -> Result<Integrity> {
    if !path.exists() {
        return Ok(Integrity::Missing);
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| StoreError::NotADatabase {
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
        Err(e) => Err(StoreError::db("checking the database's integrity")(e)),
    }
}

impl Store {
    /// When the daemon next has work (SPEC §9 item 6): the earliest
    /// `next_run_at` of an active loop outside `exclude` (loops the daemon
    /// is already running or could not make progress on), the earliest
    /// `expires_at` of an active loop, and the earliest unexpired lease of
    /// a running run that `runner_id` does not hold.
    ///
    /// An expired lease whose process is still alive is not reported: its
    /// recovery is refused until the process dies, so waking for it would
    /// only spin.
    pub fn next_wake(
        &self,
        now: Timestamp,
        runner_id: &str,
        exclude: &[LoopId],
    ) -> Result<NextWake> {
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
        let due = instant(
            "SELECT MIN(next_run_at) FROM loops
             WHERE status = 'active' AND next_run_at IS NOT NULL
               AND id NOT IN (SELECT value FROM json_each(?1))",
            &[&excluded],
        )?;
        let expiry = instant(
            "SELECT MIN(expires_at) FROM loops WHERE status = 'active' AND expires_at IS NOT NULL",
            &[],
        )?;
        let lease_expiry = instant(
            "SELECT MIN(lease_expires_at) FROM loop_runs
             WHERE status = 'running' AND lease_expires_at > ?1
               AND (claimed_by IS NULL OR claimed_by <> ?2)",
            &[&ts(now), &runner_id],
        )?;
        Ok(NextWake {
            due,
            expiry,
            lease_expiry,
        })
    }

    /// The running runs claimed by a daemon of `host` (runner ids
    /// `<host>:<pid>:<leaseId>`, SPEC §0) other than `except_runner`, oldest
    /// claim first.
    pub fn running_runs_of_host(&self, host: &str, except_runner: &str) -> Result<Vec<HostRun>> {
        let prefix = format!("{host}:");
        let found = rows::query_vec(
            &self.conn,
            "SELECT * FROM loop_runs
             WHERE status = 'running' AND claimed_by <> ?2
               AND substr(claimed_by, 1, length(?1)) = ?1
             ORDER BY started_at, rowid",
            params![prefix, except_runner],
            ("loop_runs", "finding the runs of this host's daemons"),
            |row| {
                let (run, process) = run_and_process(row)?;
                let spawn_id = rows::optional_column(row, "spawn_id")?;
                Ok(HostRun {
                    run,
                    process,
                    spawn_id,
                })
            },
        )?;
        Ok(found)
    }

    /// The recorded processes of the running steps of the open workflow
    /// runs linked to `run_id`, alive or not.
    pub fn step_processes(&self, run_id: &RunId) -> Result<Vec<ProcessRef>> {
        linked_step_processes(&self.conn, run_id)
    }
}

/// A fresh random lease id for a daemon start (SPEC §0).
pub fn new_lease_id() -> loops_core::LeaseId {
    loops_core::LeaseId::from_bytes(crate::random_id_bytes())
}
