//! The SQLite side of [`crate::loops`].

use std::ops::ControlFlow;

use loops_core::{
    Loop, LoopId, LoopStatus, NewLoop, RunStatus, Schedule, Timestamp, WorkflowId,
    initial_next_run, validate_new_loop,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::backend::LoopOps;
use crate::error::{Result, StoreError};
use crate::loops::{
    DEFAULT_LOOP_LIMIT, DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, LoopUpdate,
    PolicyColumns, Refusal, new_streaks,
};
use crate::random_id_bytes;
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, loop_columns, ts, ts_opt};

/// Reads one loop by id on `conn` (inside or outside a transaction).
pub(crate) fn query_loop(conn: &Connection, id: &LoopId) -> Result<Option<Loop>> {
    loop_returning(
        conn,
        concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = ?1"),
        [id.as_str()],
        "reading a loop",
    )
}

/// Runs a statement that returns loop rows (`SELECT` or `… RETURNING`).
fn loops_from(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    context: &'static str,
) -> Result<Vec<Loop>> {
    rows::query_vec(conn, sql, params, ("loops", context), rows::loop_row)
}

/// Runs a statement returning at most one loop row (`SELECT` or a
/// single-row `UPDATE … RETURNING`).
fn loop_returning(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    context: &'static str,
) -> Result<Option<Loop>> {
    rows::query_opt(conn, sql, params, ("loops", context), rows::loop_row)
}

fn encode<T: serde::Serialize>(value: &T, what: &str) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Encode(format!("{what}: {e}")))
}

/// A millisecond setting as SQLite's signed integer.
fn sql_int(ms: u64, what: &str) -> Result<i64> {
    i64::try_from(ms).map_err(|_| StoreError::Encode(format!("{what}: {ms} is too large")))
}

fn not_found(key: &str) -> StoreError {
    StoreError::NotFound {
        kind: "loop",
        key: key.to_owned(),
    }
}

/// True when the only slot of a `once` loop already has a row that can
/// never be claimed again: succeeded, skipped, or out of attempts.
fn once_slot_is_spent(conn: &Connection, lp: &Loop, at: Timestamp) -> Result<bool> {
    let found: Option<(String, u32, Option<String>)> = conn
        .query_row(
            "SELECT status, attempt, error FROM loop_runs
             WHERE loop_id = ?1 AND scheduled_for = ?2",
            params![lp.id.as_str(), ts(at)],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(StoreError::db("reading a once loop's run"))?;
    Ok(match found {
        None => false,
        Some((status, attempt, error)) => match status.parse::<RunStatus>() {
            Ok(s) if s.is_terminal() => true,
            Ok(s) if s.is_retryable() => {
                !crate::runs::may_run_again(s, attempt, error.as_deref(), lp.max_attempts)
            }
            _ => false,
        },
    })
}

/// SQL true when the JSON array of labels `$have` holds every label of the
/// JSON array `$want` (issue 17).
macro_rules! has_labels {
    ($have:literal, $want:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM json_each(",
            $want,
            ") w WHERE NOT EXISTS (SELECT 1 FROM json_each(",
            $have,
            ") h WHERE h.value = w.value))"
        )
    };
}
pub(super) use has_labels;

/// Expires the active loops whose expiry has passed, through
/// `idx_loops_status_expires` (V5): the tick runs it every time, so its
/// cost must be the loops it expires, not every active loop.
pub(super) const EXPIRE_LOOPS: &str = concat!(
    "UPDATE loops SET status = 'expired', next_run_at = NULL, updated_at = ?1
     WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ?1
     RETURNING ",
    loop_columns!()
);
/// The due active loops, earliest first: `idx_loops_status_next` from its
/// start, so it reads the due loops and stops.
pub(super) const DUE_LOOPS: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops
     WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ?1
     ORDER BY next_run_at, rowid LIMIT ?2"
);

/// Whether a loop has a run in flight: the running runs only
/// (`idx_runs_status_created`), not the loop's whole history.
pub(super) const HAS_RUNNING_RUN: &str =
    "SELECT EXISTS (SELECT 1 FROM loop_runs WHERE loop_id = ?1 AND status = 'running')";

impl LoopOps for Sqlite {
    fn create_loop(&self, new: &NewLoop, now: Timestamp) -> Result<Loop> {
        validate_new_loop(new)?;
        let next_run_at = initial_next_run(&new.schedule, now)?;
        let lp = Loop {
            id: LoopId::from_bytes(random_id_bytes()),
            name: new.name.clone(),
            description: new.description.clone(),
            status: LoopStatus::Active,
            schedule: new.schedule.clone(),
            target: new.target.clone(),
            next_run_at,
            retry_scheduled_for: None,
            catch_up: new.catch_up,
            catch_up_limit: new.catch_up_limit,
            overlap: new.overlap,
            max_attempts: new.max_attempts,
            retry_delay_ms: new.retry_delay_ms,
            lease_ms: new.lease_ms,
            expires_at: new.expires_at,
            created_at: now,
            updated_at: now,
            paused_reason: None,
            policy: new.policy.clone(),
            consecutive_successes: new_streaks(&new.policy).0,
            consecutive_failures: new_streaks(&new.policy).1,
            hooks: new.hooks.clone(),
        };
        let schedule = encode(&lp.schedule, "loop schedule")?;
        let target = encode(&lp.target, "loop target")?;
        let p = PolicyColumns::of(&lp.policy)?;
        self.conn
            .execute(
                "INSERT INTO loops (id, name, description, status, schedule_json, target_json,
                   next_run_at, retry_scheduled_for, catch_up, catch_up_limit, overlap,
                   max_attempts, retry_delay_ms, lease_ms, expires_at, created_at, updated_at,
                   labels, expires_after_runs, pause_after_failures, backoff, max_retry_delay_ms,
                   skip_exit_codes, on_failure, on_success, hook_show_output)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15,
                   ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)",
                params![
                    lp.id.as_str(),
                    lp.name,
                    lp.description,
                    lp.status.as_str(),
                    schedule,
                    target,
                    ts_opt(lp.next_run_at),
                    lp.catch_up.as_str(),
                    lp.catch_up_limit,
                    lp.overlap.as_str(),
                    lp.max_attempts,
                    sql_int(lp.retry_delay_ms, "retryDelayMs")?,
                    sql_int(lp.lease_ms, "leaseMs")?,
                    ts_opt(lp.expires_at),
                    ts(now),
                    p.labels,
                    p.expires_after_runs,
                    p.pause_after_failures,
                    p.backoff,
                    p.max_retry_delay_ms,
                    p.skip_exit_codes,
                    lp.hooks.on_failure,
                    lp.hooks.on_success,
                    lp.hooks.hook_show_output,
                ],
            )
            .map_err(StoreError::db("creating a loop"))?;
        Ok(lp)
    }

    fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        query_loop(&self.conn, id)
    }

    fn require_loop(&self, id_or_name: &str) -> Result<Loop> {
        if let Ok(id) = LoopId::parse(id_or_name)
            && let Some(lp) = self.get_loop(&id)?
        {
            return Ok(lp);
        }
        let named = loops_from(
            &self.conn,
            concat!(
                "SELECT ",
                loop_columns!(),
                " FROM loops WHERE name = ?1 ORDER BY created_at DESC, rowid DESC"
            ),
            [id_or_name],
            "looking up a loop by name",
        )?;
        crate::loops::only_named(id_or_name, named)
    }

    fn lock_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        // The caller's transaction took the write lock at BEGIN IMMEDIATE.
        query_loop(&self.conn, id)
    }

    fn lock_workflow_loops(&self, id: &WorkflowId) -> Result<Vec<Loop>> {
        // The caller's transaction took the write lock at BEGIN IMMEDIATE.
        // Every loop is read: replacing a workflow is rare, and no index
        // reaches into the target's JSON.
        loops_from(
            &self.conn,
            concat!(
                "SELECT ",
                loop_columns!(),
                " FROM loops
                 WHERE CASE WHEN json_valid(target_json)
                   THEN json_extract(target_json, '$.type') = 'workflow'
                    AND json_extract(target_json, '$.workflowId') = ?1 END
                 ORDER BY rowid"
            ),
            [id.as_str()],
            "finding a workflow's loops",
        )
    }

    fn update_loop(&self, update: &LoopUpdate<'_>) -> Result<Loop> {
        let s = update.settings;
        let p = PolicyColumns::of(&s.policy)?;
        let (reschedule, next) = match update.reschedule {
            Some(next) => (true, next),
            None => (false, None),
        };
        loop_returning(
            &self.conn,
            concat!(
                "UPDATE loops SET name = ?3, description = ?4, schedule_json = ?5,
                   target_json = ?6, catch_up = ?7, catch_up_limit = ?8, overlap = ?9,
                   max_attempts = ?10, retry_delay_ms = ?11, lease_ms = ?12, expires_at = ?13,
                   next_run_at = CASE WHEN ?14 THEN ?15 ELSE next_run_at END,
                   retry_scheduled_for = CASE WHEN ?14 THEN NULL ELSE retry_scheduled_for END,
                   updated_at = ?16, labels = ?17, expires_after_runs = ?18,
                   pause_after_failures = ?19, backoff = ?20, max_retry_delay_ms = ?21,
                   skip_exit_codes = ?22, on_failure = ?23, on_success = ?24,
                   hook_show_output = ?25
                 WHERE id = ?1 AND status = ?2 RETURNING ",
                loop_columns!()
            ),
            params![
                update.id.as_str(),
                update.status.as_str(),
                s.name,
                s.description,
                encode(&s.schedule, "loop schedule")?,
                encode(&s.target, "loop target")?,
                s.catch_up.as_str(),
                s.catch_up_limit,
                s.overlap.as_str(),
                s.max_attempts,
                sql_int(s.retry_delay_ms, "retryDelayMs")?,
                sql_int(s.lease_ms, "leaseMs")?,
                ts_opt(s.expires_at),
                reschedule,
                ts_opt(next),
                ts(update.now),
                p.labels,
                p.expires_after_runs,
                p.pause_after_failures,
                p.backoff,
                p.max_retry_delay_ms,
                p.skip_exit_codes,
                s.hooks.on_failure,
                s.hooks.on_success,
                s.hooks.hook_show_output,
            ],
            "editing a loop",
        )?
        // The write lock is held since the read, so the guard matches.
        .ok_or_else(|| StoreError::Vanished {
            kind: "loop",
            op: "edit",
            id: update.id.to_string(),
        })
    }

    fn for_each_loop(
        &self,
        filter: &LoopFilter,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        let limit = filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT);
        let what = ("loops", "listing loops");
        match filter.status {
            Some(status) => rows::query_each(
                &self.conn,
                concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops WHERE status = ?1 ORDER BY next_run_at, rowid LIMIT ?2"
                ),
                params![status.as_str(), limit],
                what,
                rows::loop_row,
                each,
            ),
            None => rows::query_each(
                &self.conn,
                concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops ORDER BY status, next_run_at, rowid LIMIT ?1"
                ),
                [limit],
                what,
                rows::loop_row,
                each,
            ),
        }
    }

    fn for_each_labeled_loop(
        &self,
        filter: &LoopFilter,
        labels: &str,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        rows::query_each(
            &self.conn,
            concat!(
                "SELECT ",
                loop_columns!(),
                " FROM loops WHERE (?1 IS NULL OR status = ?1) AND ",
                has_labels!("loops.labels", "?3"),
                " ORDER BY status, next_run_at, rowid LIMIT ?2"
            ),
            params![
                filter.status.map(LoopStatus::as_str),
                filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT),
                labels
            ],
            ("loops", "listing loops"),
            rows::loop_row,
            each,
        )
    }

    fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        count_status(&self.conn, "loops", status.map(LoopStatus::as_str))
    }

    fn count_runs(&self, status: Option<RunStatus>) -> Result<u64> {
        count_status(&self.conn, "loop_runs", status.map(RunStatus::as_str))
    }

    fn recount_statuses(&self) -> Result<bool> {
        self.write_tx(|conn| {
            let stale: bool = conn
                .query_row(COUNTS_DIFFER, [], |r| r.get(0))
                .map_err(StoreError::db("comparing the kept counts"))?;
            if stale {
                conn.execute_batch(RECOUNT)
                    .map_err(StoreError::db("recounting loops and runs"))?;
            }
            Ok(stale)
        })
    }

    fn has_running_run(&self, loop_id: &LoopId) -> Result<bool> {
        self.conn
            .query_row(HAS_RUNNING_RUN, [loop_id.as_str()], |r| r.get(0))
            .map_err(StoreError::db("checking for a running run"))
    }

    fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>> {
        loops_from(
            &self.conn,
            DUE_LOOPS,
            params![ts(now), limit],
            "selecting due loops",
        )
    }

    fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        // A user's pause gives no reason: one left over from an automatic
        // pause (which another implementation's resume would not clear) goes.
        if let Some(lp) = self.pause_active(id, None, now)? {
            return Ok(LoopChange::Changed(lp));
        }
        let lp = self.get_loop(id)?.ok_or_else(|| not_found(id.as_str()))?;
        Ok(match lp.status {
            LoopStatus::Paused => LoopChange::Already(lp),
            _ => LoopChange::Refused {
                loop_: lp,
                reason: Refusal::NotActive,
            },
        })
    }

    fn pause_loop_with_reason(
        &self,
        id: &LoopId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.pause_active(id, Some(reason), now)
    }

    fn resume_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        self.write_tx(|conn| {
            let lp = query_loop(conn, id)?.ok_or_else(|| not_found(id.as_str()))?;
            if lp.status == LoopStatus::Active {
                return Ok(LoopChange::Already(lp));
            }
            let refuse = |loop_, reason| Ok(LoopChange::Refused { loop_, reason });
            if lp.expires_at.is_some_and(|e| e <= now) {
                return refuse(lp, Refusal::PastExpiry);
            }
            let (next, retry) = match (lp.status, lp.next_run_at) {
                (LoopStatus::Paused, Some(next)) => (Some(next), lp.retry_scheduled_for),
                _ => (initial_next_run(&lp.schedule, now)?, None),
            };
            let Some(next) = next else {
                return refuse(lp, Refusal::NothingToRun);
            };
            if let Schedule::Once { at } = lp.schedule
                && next == at
                && once_slot_is_spent(conn, &lp, at)?
            {
                return refuse(lp, Refusal::NothingToRun);
            }
            let changed = loop_returning(
                conn,
                concat!(
                    "UPDATE loops SET status = 'active', next_run_at = ?3, retry_scheduled_for = ?4,
                       paused_reason = NULL, consecutive_failures = 0,
                       consecutive_successes = CASE WHEN status = 'expired' THEN 0
                         ELSE consecutive_successes END,
                       updated_at = ?5
                     WHERE id = ?1 AND status = ?2 RETURNING ",
                    loop_columns!()
                ),
                params![
                    id.as_str(),
                    lp.status.as_str(),
                    ts(next),
                    ts_opt(retry),
                    ts(now)
                ],
                "resuming a loop",
            )?;
            // The write lock is held since the read, so the guard matches.
            changed
                .map(LoopChange::Changed)
                .ok_or_else(|| StoreError::Vanished {
                    kind: "loop",
                    op: "resume",
                    id: id.to_string(),
                })
        })
    }

    fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        let changed = loop_returning(
            &self.conn,
            concat!(
                "UPDATE loops SET status = 'stopped', next_run_at = NULL, retry_scheduled_for = NULL,
                   updated_at = ?2
                 WHERE id = ?1 AND status <> 'stopped' RETURNING ",
                loop_columns!()
            ),
            params![id.as_str(), ts(now)],
            "stopping a loop",
        )?;
        if let Some(lp) = changed {
            return Ok(LoopChange::Changed(lp));
        }
        let lp = self.get_loop(id)?.ok_or_else(|| not_found(id.as_str()))?;
        Ok(LoopChange::Already(lp))
    }

    fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>> {
        loops_from(&self.conn, EXPIRE_LOOPS, [ts(now)], "expiring loops")
    }

    fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome> {
        self.write_tx(|conn| {
            if query_loop(conn, id)?.is_none() {
                return Ok(DeleteOutcome::NotFound);
            }
            // The links are cleared explicitly rather than left to the
            // schema's `ON DELETE SET NULL`, so the outcome is the same
            // whether or not the connection enforces foreign keys.
            let (unlinked, runs) = match history {
                DeleteHistory::Keep => {
                    let unlinked = conn
                        .execute(
                            "UPDATE workflow_runs SET loop_id = NULL WHERE loop_id = ?1",
                            [id.as_str()],
                        )
                        .map_err(StoreError::db("unlinking workflow runs"))?;
                    (unlinked, 0)
                }
                DeleteHistory::Purge => {
                    let unlinked = conn
                        .execute(
                            "UPDATE workflow_runs SET loop_id = NULL, loop_run_id = NULL
                             WHERE loop_id = ?1
                                OR loop_run_id IN (SELECT id FROM loop_runs WHERE loop_id = ?1)",
                            [id.as_str()],
                        )
                        .map_err(StoreError::db("unlinking workflow runs"))?;
                    let runs = conn
                        .execute("DELETE FROM loop_runs WHERE loop_id = ?1", [id.as_str()])
                        .map_err(StoreError::db("deleting runs"))?;
                    (unlinked, runs)
                }
            };
            conn.execute("DELETE FROM loops WHERE id = ?1", [id.as_str()])
                .map_err(StoreError::db("deleting a loop"))?;
            Ok(DeleteOutcome::Deleted {
                runs_deleted: runs as u64,
                workflow_runs_unlinked: unlinked as u64,
            })
        })
    }
}

impl Sqlite {
    /// Pauses `id` if it is active, recording `reason` (or none).
    fn pause_active(
        &self,
        id: &LoopId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        loop_returning(
            &self.conn,
            concat!(
                "UPDATE loops SET status = 'paused', paused_reason = ?2, updated_at = ?3
                 WHERE id = ?1 AND status = 'active' RETURNING ",
                loop_columns!()
            ),
            params![id.as_str(), reason, ts(now)],
            "pausing a loop",
        )
    }
}

/// Rows of `table` (with `status`, or all), from the counts V6's triggers
/// keep: a few rows read, however many loops and runs are stored.
pub(super) const COUNT_STATUS: &str =
    "SELECT COALESCE(SUM(n), 0) FROM status_counts WHERE tbl = ?1 AND (?2 IS NULL OR status = ?2)";

fn count_status(conn: &Connection, table: &'static str, status: Option<&str>) -> Result<u64> {
    let n: i64 = conn
        .query_row(COUNT_STATUS, params![table, status], |r| r.get(0))
        .map_err(StoreError::db(if table == "loops" {
            "counting loops"
        } else {
            "counting runs"
        }))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Every row counted by status, as V6's triggers keep it.
macro_rules! counted {
    () => {
        "SELECT 'loops' AS tbl, status, COUNT(*) AS n FROM loops GROUP BY status
         UNION ALL SELECT 'loop_runs', status, COUNT(*) FROM loop_runs GROUP BY status"
    };
}

/// Whether the kept counts differ from a real count (a zero kept count is
/// the same as none).
const COUNTS_DIFFER: &str = concat!(
    "WITH actual AS (",
    counted!(),
    "), kept AS (SELECT tbl, status, n FROM status_counts WHERE n != 0)
     SELECT EXISTS (SELECT * FROM actual EXCEPT SELECT * FROM kept)
         OR EXISTS (SELECT * FROM kept EXCEPT SELECT * FROM actual)"
);

/// Rewrites the kept counts from a real count.
const RECOUNT: &str = concat!(
    "DELETE FROM status_counts; INSERT INTO status_counts (tbl, status, n) ",
    counted!(),
    ";"
);
