//! The PostgreSQL side of [`crate::runs`]: lookups, leases, finalizes and
//! skips here; claims, recovery and releases in `runs/`.
//!
//! The statements are those of `sqlite/runs.rs`. What PostgreSQL adds:
//! - an operation that advances a loop locks the loop's row first
//!   ([`lock_loop`]), before it touches a run, so every writer of one loop
//!   takes its locks in the same order;
//! - a finalize, a skip-and-advance and a release wake the other daemons
//!   (`pg_notify`, delivered at commit);
//! - a finalize whose COMMIT was cut off by a lost connection is not
//!   written again blindly: the run is re-read, and the finalize reported
//!   as landed when the row carries its result under the fence's claim
//!   (`outcome.rs`).

mod advance;
mod claim;
mod linked;
mod outcome;
mod recover;
mod release;
mod takeover;

use loops_core::{ExecutorResult, Loop, LoopId, LoopRun, ProcessRef, RunId, RunStatus, Timestamp};

use self::outcome::finalize_landed;
use super::loops::{lock_loop, query_loop};
use crate::backend::RunOps;
use crate::error::{Result, StoreError};
use crate::postgres::rows::{self, ts};
use crate::postgres::{Conn, Params, Postgres};
use crate::random_id_bytes;
use crate::runs::{
    Advance, DEFAULT_RUN_LIMIT, Fence, Finalized, RunFilter, SkipOutcome, offset_ms,
};
use crate::sqlite::rows::run_columns;

/// Runs a statement returning at most one run row (`SELECT` or
/// `… RETURNING`).
fn run_returning(
    c: &mut Conn<'_>,
    sql: &str,
    params: Params<'_>,
    context: &'static str,
) -> Result<Option<LoopRun>> {
    c.query_opt(sql, params, ("loop_runs", context), rows::run_row)
}

/// Reads one run by id.
fn query_run(c: &mut Conn<'_>, id: &RunId) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!("SELECT ", run_columns!(), " FROM loop_runs WHERE id = $1"),
        &[&id.as_str()],
        "reading a run",
    )
}

/// Reads the run of one slot.
fn query_slot(c: &mut Conn<'_>, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE loop_id = $1 AND scheduled_for = $2"
        ),
        &[&loop_id.as_str(), &ts(slot)],
        "reading a run by slot",
    )
}

/// Locks the loop of run `id` (see [`lock_loop`]) before the run is
/// written. Nothing is locked when the run or its loop does not exist.
fn lock_loop_of_run(c: &mut Conn<'_>, id: &RunId) -> Result<()> {
    let found = c.query(
        "SELECT loop_id FROM loop_runs WHERE id = $1",
        &[&id.as_str()],
        "reading a run's loop",
    )?;
    if let Some(row) = found.first() {
        let loop_id: &str = row
            .try_get(0)
            .map_err(StoreError::db("reading a run's loop"))?;
        if let Ok(loop_id) = LoopId::parse(loop_id) {
            lock_loop(c, &loop_id)?;
        }
    }
    Ok(())
}

/// The finalize `UPDATE`. `$10` is the fence's claimant, or NULL for an
/// unfenced finalize, and `$12` its claim token, when it carries one;
/// either way only a running row changes, so a terminal row never does.
/// `pid_start_ms` survives only when the pid is the one recorded at spawn.
const FINALIZE_SQL: &str = concat!(
    "UPDATE loop_runs SET
       status = CASE WHEN $2::text = 'failed' AND $5::bigint IS NOT NULL AND EXISTS (
           SELECT 1 FROM loops l
            WHERE l.id = loop_runs.loop_id AND l.skip_exit_codes IS NOT NULL
              AND l.skip_exit_codes::jsonb @> to_jsonb($5::bigint))
         THEN 'skipped' ELSE $2 END,
       finished_at = $3, lease_expires_at = NULL,
       pid_start_ms = CASE WHEN pid IS NOT DISTINCT FROM $4 THEN pid_start_ms ELSE NULL END,
       pid = $4, exit_code = $5, duration_ms = $6, stdout = $7, stderr = $8, error = $9,
       updated_at = $3
     WHERE id = $1 AND status = 'running'
       AND ($10::text IS NULL OR (claimed_by = $10 AND lease_expires_at > $11
                                  AND ($12::text IS NULL OR claim_token = $12)))
     RETURNING ",
    run_columns!()
);

/// Applies a finalize; `Some(row)` when it was written.
fn apply_finalize(
    c: &mut Conn<'_>,
    run_id: &RunId,
    result: &ExecutorResult,
    fence: Option<&Fence>,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    let status = RunStatus::from(result.status);
    run_returning(
        c,
        FINALIZE_SQL,
        &[
            &run_id.as_str(),
            &status.as_str(),
            &ts(result.finished_at),
            &result.pid.map(i64::from),
            &result.exit_code.map(i64::from),
            &result.duration_ms,
            &result.stdout,
            &result.stderr,
            &result.error,
            &fence.map(|f| f.claimed_by.as_str()),
            &ts(now),
            &fence.and_then(|f| f.claim_token.as_deref()),
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

fn slot_vanished(lp: &Loop, slot: Timestamp) -> StoreError {
    StoreError::Vanished {
        kind: "run",
        op: "skip",
        id: format!("{}@{slot}", lp.id),
    }
}

/// Inserts a skipped row for `slot` unless the slot has one; `Some(row)`
/// when inserted.
fn insert_skipped(
    c: &mut Conn<'_>,
    lp: &Loop,
    slot: Timestamp,
    reason: &str,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!(
            "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, finished_at, error, created_at, updated_at)
             VALUES ($1, $2, $3, $4, 1, 'skipped', NULL, $5, $6, $5, $5)
             ON CONFLICT DO NOTHING
             RETURNING ",
            run_columns!()
        ),
        &[
            &RunId::from_bytes(random_id_bytes()).as_str(),
            &lp.id.as_str(),
            &lp.name,
            &ts(slot),
            &ts(now),
            &reason,
        ],
        "recording a skipped run",
    )
}

impl RunOps for Postgres {
    fn get_run(&self, id: &RunId) -> Result<Option<LoopRun>> {
        self.with(|c| query_run(c, id))
    }

    fn get_run_by_slot(&self, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
        self.with(|c| query_slot(c, loop_id, slot))
    }

    fn list_labeled_runs(&self, filter: &RunFilter, labels: &str) -> Result<Vec<LoopRun>> {
        let limit = i64::from(filter.limit.unwrap_or(DEFAULT_RUN_LIMIT));
        let loop_id = filter.loop_id.as_ref().map(LoopId::as_str);
        let status = filter.status.map(RunStatus::as_str);
        self.with(|c| {
            c.query_vec(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs
                     WHERE loop_id IN (SELECT id FROM loops WHERE labels::jsonb @> $4::text::jsonb)
                       AND ($1::text IS NULL OR loop_id = $1) AND ($2::text IS NULL OR status = $2)
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                ),
                &[&loop_id, &status, &limit, &labels],
                ("loop_runs", "listing runs"),
                rows::run_row,
            )
        })
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<LoopRun>> {
        let limit = i64::from(filter.limit.unwrap_or(DEFAULT_RUN_LIMIT));
        let loop_id = filter.loop_id.as_ref().map(LoopId::as_str);
        let status = filter.status.map(RunStatus::as_str);
        let what = ("loop_runs", "listing runs");
        // One statement per filter, so each reads its own index in order
        // (`idx_runs_loop`, `idx_runs_status_created`, `idx_runs_created`).
        self.with(|c| match (loop_id, status) {
            (Some(l), Some(s)) => c.query_vec(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE loop_id = $1 AND status = $2
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                ),
                &[&l, &s, &limit],
                what,
                rows::run_row,
            ),
            (Some(l), None) => c.query_vec(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE loop_id = $1
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                ),
                &[&l, &limit],
                what,
                rows::run_row,
            ),
            (None, Some(s)) => c.query_vec(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE status = $1
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                ),
                &[&s, &limit],
                what,
                rows::run_row,
            ),
            (None, None) => c.query_vec(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs ORDER BY created_at DESC, id DESC LIMIT $1"
                ),
                &[&limit],
                what,
                rows::run_row,
            ),
        })
    }

    fn heartbeat_run_lease(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        self.with(|c| {
            run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET lease_expires_at = $3, updated_at = $4
                     WHERE id = $1 AND status = 'running' AND claimed_by = $2
                       AND lease_expires_at > $4
                       AND ($5::text IS NULL OR claim_token = $5)
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    &run_id.as_str(),
                    &fence.claimed_by,
                    &ts(now.add_ms(offset_ms(lease_ms))),
                    &ts(now),
                    &fence.claim_token,
                ],
                "renewing a run lease",
            )
        })
    }

    fn mark_run_spawn(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        spawn_id: Option<&str>,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        self.with(|c| {
            run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET pid = $2, pid_start_ms = $3,
                       spawn_id = COALESCE($6, spawn_id), updated_at = $5
                     WHERE id = $1 AND status = 'running'
                       AND ($4::text IS NULL OR claimed_by = $4)
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    &run_id.as_str(),
                    &i64::from(process.pid),
                    &process.start,
                    &claimed_by,
                    &ts(now),
                    &spawn_id,
                ],
                "recording a run's pid",
            )
        })
    }

    fn finalize_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: Option<&Fence>,
        now: Timestamp,
    ) -> Result<LoopRun> {
        let written = self.resolving(
            || {
                self.write_tx(|c| {
                    let run = apply_finalize(c, run_id, result, fence, now)?;
                    if let Some(run) = &run {
                        c.notify(run.loop_id.as_str())?;
                    }
                    Ok(run)
                })
            },
            |c| Ok(finalize_landed(c, run_id, result, fence)?.map(Some)),
        )?;
        if let Some(run) = written {
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
        self.resolving(
            || {
                self.write_tx(|c| {
                    lock_loop_of_run(c, run_id)?;
                    match apply_finalize(c, run_id, result, Some(fence), now)? {
                        Some(run) => {
                            let (advance, loop_) = advance::advance_after(c, &run, now)?;
                            c.notify(run.loop_id.as_str())?;
                            Ok(Finalized {
                                run,
                                loop_,
                                applied: true,
                                advance,
                            })
                        }
                        None => {
                            let run = query_run(c, run_id)?
                                .ok_or_else(|| vanished(run_id, "finalize"))?;
                            let loop_ = query_loop(c, &run.loop_id)?;
                            Ok(Finalized {
                                run,
                                loop_,
                                applied: false,
                                advance: Advance::FencedOut,
                            })
                        }
                    }
                })
            },
            |c| {
                let Some(run) = finalize_landed(c, run_id, result, Some(fence))? else {
                    return Ok(None);
                };
                // The advance committed with the finalize, but what it
                // decided was lost with the connection: the loop is
                // reported as it is stored now.
                let loop_ = query_loop(c, &run.loop_id)?;
                Ok(Some(Finalized {
                    run,
                    loop_,
                    applied: true,
                    advance: Advance::Unconfirmed,
                }))
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
        if let Some(run) = self.with(|c| insert_skipped(c, lp, slot, reason, now))? {
            return Ok(run);
        }
        self.get_run_by_slot(&lp.id, slot)?
            .ok_or_else(|| slot_vanished(lp, slot))
    }

    fn create_skipped_run_and_advance(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<SkipOutcome> {
        // A slot with a row is left as it is, and most often the row is
        // another daemon's claim of that very slot: say so without taking
        // the loop's lock, which that daemon may hold in a transaction that
        // waits on this one's locks (a deadlock).
        if let Some(run) = self.with(|c| query_slot(c, &lp.id, slot))? {
            return Ok(SkipOutcome::Occupied(run));
        }
        self.write_tx(|c| {
            lock_loop(c, &lp.id)?;
            match insert_skipped(c, lp, slot, reason, now)? {
                Some(run) => {
                    let (advance, loop_) = advance::advance_after(c, &run, now)?;
                    c.notify(lp.id.as_str())?;
                    Ok(SkipOutcome::Skipped {
                        run,
                        loop_,
                        advance,
                    })
                }
                None => query_slot(c, &lp.id, slot)?
                    .map(SkipOutcome::Occupied)
                    .ok_or_else(|| slot_vanished(lp, slot)),
            }
        })
    }
}
