//! The SQLite side of [`crate::runs`]: the operations are written once in
//! `runs/ops.rs` and `runs/release.rs`; SQLite adds nothing to them
//! ([`RunHost`]'s defaults). Claims and recovery live in `runs/`.

pub(in crate::sqlite) mod advance;
mod claim;
pub(in crate::sqlite) mod recover;

use loops_core::{LoopRun, ProcessRef};
use rusqlite::{Connection, Row};

use crate::error::Result;
use crate::runs::ops::RunHost;
use crate::sqlite::Sqlite;
use crate::sqlite::rows;

/// A run row together with its recorded process (pid plus start time).
pub(crate) fn run_and_process(row: &Row<'_>) -> rusqlite::Result<(LoopRun, Option<ProcessRef>)> {
    Ok((rows::run_row(row)?, rows::run_process(row)?))
}

/// Runs a statement returning at most one run row (`SELECT` or
/// `… RETURNING`).
pub(crate) fn run_returning(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    context: &'static str,
) -> Result<Option<LoopRun>> {
    rows::query_opt(conn, sql, params, ("loop_runs", context), rows::run_row)
}

/// A commit on SQLite is never lost without an answer, and every run of
/// the database is this machine's.
impl RunHost for Sqlite {}
