//! The SQLite side of [`crate::runs`].

pub(in crate::sqlite) mod advance;
mod claim;
pub(in crate::sqlite) mod recover;
mod release;

use loops_core::{ExecutorResult, Loop, LoopId, LoopRun, ProcessRef, RunId, RunStatus, Timestamp};
use rusqlite::{Connection, Row, params};

use crate::backend::RunOps;
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::runs::{
    Advance, DEFAULT_RUN_LIMIT, Fence, Finalized, RunFilter, SkipOutcome, offset_ms,
};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, run_columns, ts};

/// A run row together with its recorded process (pid plus start time).
pub(crate) fn run_and_process(row: &Row<'_>) -> rusqlite::Result<(LoopRun, Option<ProcessRef>)> {
    Ok((rows::run_row(row)?, rows::run_process(row)?))
}

/// Reads one run by id on `conn`.
pub(crate) fn query_run(conn: &Connection, id: &RunId) -> Result<Option<LoopRun>> {
    run_returning(
        conn,
        concat!("SELECT ", run_columns!(), " FROM loop_runs WHERE id = ?1"),
        [id.as_str()],
        "reading a run",
    )
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

/// The finalize `UPDATE`. A failure whose exit code is one of its loop's
/// `skip_exit_codes` (issue 17) is recorded skipped. `?10` is the fence's claimant, or NULL for an
/// unfenced finalize, and `?12` its claim token, when it carries one; either way only a running row changes, so a terminal
/// row never does. `pid_start_ms` survives only when the pid is the one
/// recorded at spawn.
const FINALIZE_SQL: &str = concat!(
    "UPDATE loop_runs SET
       status = CASE WHEN ?2 = 'failed' AND ?5 IS NOT NULL AND EXISTS (
           SELECT 1 FROM loops l, json_each(l.skip_exit_codes) j
            WHERE l.id = loop_runs.loop_id AND l.skip_exit_codes IS NOT NULL AND j.value = ?5)
         THEN 'skipped' ELSE ?2 END,
       finished_at = ?3, lease_expires_at = NULL,
       pid_start_ms = CASE WHEN pid IS ?4 THEN pid_start_ms ELSE NULL END,
       pid = ?4, exit_code = ?5, duration_ms = ?6, stdout = ?7, stderr = ?8, error = ?9,
       updated_at = ?3
     WHERE id = ?1 AND status = 'running'
       AND (?10 IS NULL OR (claimed_by = ?10 AND lease_expires_at > ?11
                            AND (?12 IS NULL OR claim_token IS ?12)))
     RETURNING ",
    run_columns!()
);

/// Applies a finalize on `conn`; `Some(row)` when it was written.
fn apply_finalize(
    conn: &Connection,
    run_id: &RunId,
    result: &ExecutorResult,
    fence: Option<&Fence>,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    let status = RunStatus::from(result.status);
    run_returning(
        conn,
        FINALIZE_SQL,
        params![
            run_id.as_str(),
            status.as_str(),
            ts(result.finished_at),
            result.pid,
            result.exit_code,
            result.duration_ms,
            result.stdout,
            result.stderr,
            result.error,
            fence.map(|f| f.claimed_by.as_str()),
            ts(now),
            fence.and_then(|f| f.claim_token.as_deref()),
        ],
        "finalizing a run",
    )
}

fn vanished(id: &RunId, op: &'static str) -> StoreError {
    StoreError::Vanished {
        kind: "run",
        op,
        id: id.to_string(),
    }
}

/// Inserts a skipped row for `slot` unless the slot has one; `Some(row)`
/// when inserted.
fn insert_skipped(
    conn: &Connection,
    lp: &Loop,
    slot: Timestamp,
    reason: &str,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    run_returning(
        conn,
        concat!(
            "INSERT OR IGNORE INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, finished_at, error, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 1, 'skipped', NULL, ?5, ?6, ?5, ?5)
             RETURNING ",
            run_columns!()
        ),
        params![
            RunId::from_bytes(random_id_bytes()).as_str(),
            lp.id.as_str(),
            lp.name,
            ts(slot),
            ts(now),
            reason,
        ],
        "recording a skipped run",
    )
}

fn query_slot(conn: &Connection, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
    run_returning(
        conn,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2"
        ),
        params![loop_id.as_str(), ts(slot)],
        "reading a run by slot",
    )
}

/// The newest runs of every loop: `idx_runs_created` (V5) gives them in
/// order, so the cost is the limit, not the number of runs stored.
pub(super) const LIST_ALL_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE ?1 IS NULL AND ?2 IS NULL
     ORDER BY created_at DESC, rowid DESC LIMIT ?3"
);

/// The newest runs of one loop: `idx_runs_loop` gives them in order.
pub(super) const LIST_LOOP_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE loop_id = ?1 AND ?2 IS NULL
     ORDER BY created_at DESC, rowid DESC LIMIT ?3"
);

/// The newest runs of one status: `idx_runs_status_created` (V6) gives
/// them in order.
pub(super) const LIST_RUNS_BY_STATUS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE ?1 IS NULL AND status = ?2
     ORDER BY created_at DESC, rowid DESC LIMIT ?3"
);

impl RunOps for Sqlite {
    fn get_run(&self, id: &RunId) -> Result<Option<LoopRun>> {
        query_run(&self.conn, id)
    }

    fn get_run_by_slot(&self, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
        query_slot(&self.conn, loop_id, slot)
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<LoopRun>> {
        let limit = filter.limit.unwrap_or(DEFAULT_RUN_LIMIT);
        let sql = match (filter.loop_id.is_some(), filter.status.is_some()) {
            (true, true) => {
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE loop_id = ?1 AND status = ?2
                     ORDER BY created_at DESC, rowid DESC LIMIT ?3"
                )
            }
            (true, false) => LIST_LOOP_RUNS,
            (false, true) => LIST_RUNS_BY_STATUS,
            (false, false) => LIST_ALL_RUNS,
        };
        rows::query_vec(
            &self.conn,
            sql,
            params![
                filter.loop_id.as_ref().map(LoopId::as_str),
                filter.status.map(RunStatus::as_str),
                limit
            ],
            ("loop_runs", "listing runs"),
            rows::run_row,
        )
    }

    fn list_labeled_runs(&self, filter: &RunFilter, labels: &str) -> Result<Vec<LoopRun>> {
        rows::query_vec(
            &self.conn,
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM loop_runs
                 WHERE loop_id IN (SELECT id FROM loops WHERE ",
                crate::sqlite::loops::has_labels!("loops.labels", "?4"),
                ") AND (?1 IS NULL OR loop_id = ?1) AND (?2 IS NULL OR status = ?2)
                 ORDER BY created_at DESC, rowid DESC LIMIT ?3"
            ),
            params![
                filter.loop_id.as_ref().map(LoopId::as_str),
                filter.status.map(RunStatus::as_str),
                filter.limit.unwrap_or(DEFAULT_RUN_LIMIT),
                labels
            ],
            ("loop_runs", "listing runs"),
            rows::run_row,
        )
    }

    fn heartbeat_run_lease(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        run_returning(
            &self.conn,
            concat!(
                "UPDATE loop_runs SET lease_expires_at = ?3, updated_at = ?4
                 WHERE id = ?1 AND status = 'running' AND claimed_by = ?2 AND lease_expires_at > ?4
                   AND (?5 IS NULL OR claim_token IS ?5)
                 RETURNING ",
                run_columns!()
            ),
            params![
                run_id.as_str(),
                fence.claimed_by,
                ts(now.add_ms(offset_ms(lease_ms))),
                ts(now),
                fence.claim_token,
            ],
            "renewing a run lease",
        )
    }

    fn mark_run_spawn(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        spawn_id: Option<&str>,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        run_returning(
            &self.conn,
            concat!(
                "UPDATE loop_runs SET pid = ?2, pid_start_ms = ?3, spawn_id = COALESCE(?6, spawn_id),
                   updated_at = ?5
                 WHERE id = ?1 AND status = 'running' AND (?4 IS NULL OR claimed_by = ?4)
                 RETURNING ",
                run_columns!()
            ),
            params![
                run_id.as_str(),
                process.pid,
                process.start,
                claimed_by,
                ts(now),
                spawn_id
            ],
            "recording a run's pid",
        )
    }

    fn finalize_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: Option<&Fence>,
        now: Timestamp,
    ) -> Result<LoopRun> {
        if let Some(run) = apply_finalize(&self.conn, run_id, result, fence, now)? {
            return Ok(run);
        }
        self.get_run(run_id)?
            .ok_or_else(|| vanished(run_id, "finalize"))
    }

    fn finalize_and_advance(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: &Fence,
        now: Timestamp,
    ) -> Result<Finalized> {
        self.write_tx(
            |conn| match apply_finalize(conn, run_id, result, Some(fence), now)? {
                Some(run) => {
                    let (advance, loop_) = advance::advance_after(conn, &run, now)?;
                    Ok(Finalized {
                        run,
                        loop_,
                        applied: true,
                        advance,
                    })
                }
                None => {
                    let run =
                        query_run(conn, run_id)?.ok_or_else(|| vanished(run_id, "finalize"))?;
                    let loop_ = crate::sqlite::loops::query_loop(conn, &run.loop_id)?;
                    Ok(Finalized {
                        run,
                        loop_,
                        applied: false,
                        advance: Advance::FencedOut,
                    })
                }
            },
        )
    }

    fn create_skipped_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<LoopRun> {
        if let Some(run) = insert_skipped(&self.conn, lp, slot, reason, now)? {
            return Ok(run);
        }
        self.get_run_by_slot(&lp.id, slot)?
            .ok_or_else(|| StoreError::Vanished {
                kind: "run",
                op: "skip",
                id: format!("{}@{slot}", lp.id),
            })
    }

    fn create_skipped_run_and_advance(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<SkipOutcome> {
        self.write_tx(|conn| match insert_skipped(conn, lp, slot, reason, now)? {
            Some(run) => {
                let (advance, loop_) = advance::advance_after(conn, &run, now)?;
                Ok(SkipOutcome::Skipped {
                    run,
                    loop_,
                    advance,
                })
            }
            None => query_slot(conn, &lp.id, slot)?
                .map(SkipOutcome::Occupied)
                .ok_or_else(|| StoreError::Vanished {
                    kind: "run",
                    op: "skip",
                    id: format!("{}@{slot}", lp.id),
                }),
        })
    }
}
