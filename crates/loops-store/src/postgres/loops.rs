//! The PostgreSQL side of [`crate::loops`].
//!
//! The same statements as `sqlite/loops.rs`, with two differences. NULLs
//! sort first only when asked (`NULLS FIRST`), and ties are broken by `id`
//! where SQLite uses `rowid`. Where SQLite relies on `BEGIN IMMEDIATE` to
//! make a read and its write one step (resume, delete), the loop row is
//! read `FOR UPDATE` first, which serializes every writer of that loop.

use std::ops::ControlFlow;

use loops_core::{
    Loop, LoopId, LoopStatus, NewLoop, RunStatus, Schedule, Timestamp, WorkflowId,
    initial_next_run, validate_new_loop,
};

use crate::backend::LoopOps;
use crate::error::{Result, StoreError};
use crate::loops::{
    DEFAULT_LOOP_LIMIT, DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, LoopUpdate,
    PolicyColumns, Refusal, new_streaks,
};
use crate::postgres::rows::{self, Json, ts, ts_opt};
use crate::postgres::{Conn, Params, Postgres, count};
use crate::random_id_bytes;
use crate::sqlite::rows::loop_columns;

mod edit;

/// Runs a statement returning at most one loop row (`SELECT` or a
/// single-row `UPDATE … RETURNING`).
pub(super) fn loop_returning(
    c: &mut Conn<'_>,
    sql: &str,
    params: Params<'_>,
    context: &'static str,
) -> Result<Option<Loop>> {
    c.query_opt(sql, params, ("loops", context), rows::loop_row)
}

/// Reads one loop by id.
pub(super) fn query_loop(c: &mut Conn<'_>, id: &LoopId) -> Result<Option<Loop>> {
    loop_returning(
        c,
        concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = $1"),
        &[&id.as_str()],
        "reading a loop",
    )
}

/// Reads one loop by id and locks its row until the transaction ends:
/// every operation that decides from a loop's state and then writes takes
/// this lock first, so the writers of one loop (claims, advances, skips,
/// resumes, settles, recoveries) run one at a time. `None` when the loop
/// does not exist.
///
/// `FOR NO KEY UPDATE` rather than `FOR UPDATE`: it excludes every other
/// writer of the row just the same, but not the key-share lock a foreign
/// key check takes, so starting a workflow run that references the loop
/// does not wait for it.
pub(super) fn lock_loop(c: &mut Conn<'_>, id: &LoopId) -> Result<Option<Loop>> {
    loop_returning(
        c,
        concat!(
            "SELECT ",
            loop_columns!(),
            " FROM loops WHERE id = $1 FOR NO KEY UPDATE"
        ),
        &[&id.as_str()],
        "locking a loop",
    )
}

fn encode<T: serde::Serialize>(value: &T, what: &str) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Encode(format!("{what}: {e}")))
}

/// A count or millisecond setting as PostgreSQL's `bigint`.
fn big(n: u64, what: &str) -> Result<i64> {
    i64::try_from(n).map_err(|_| StoreError::Encode(format!("{what}: {n} is too large")))
}

fn not_found(key: &str) -> StoreError {
    StoreError::NotFound {
        kind: "loop",
        key: key.to_owned(),
    }
}

/// True when the only slot of a `once` loop already has a row that can
/// never be claimed again: succeeded, skipped, or out of attempts.
fn once_slot_is_spent(c: &mut Conn<'_>, lp: &Loop, at: Timestamp) -> Result<bool> {
    let found = c.query(
        "SELECT status, attempt, error FROM loop_runs WHERE loop_id = $1 AND scheduled_for = $2",
        &[&lp.id.as_str(), &ts(at)],
        "reading a once loop's run",
    )?;
    let Some(row) = found.first() else {
        return Ok(false);
    };
    let context = "reading a once loop's run";
    let status: &str = row.try_get(0).map_err(StoreError::db(context))?;
    let attempt: i64 = row.try_get(1).map_err(StoreError::db(context))?;
    let error: Option<&str> = row.try_get(2).map_err(StoreError::db(context))?;
    Ok(match status.parse::<RunStatus>() {
        Ok(s) if s.is_terminal() => true,
        Ok(s) if s.is_retryable() => !crate::runs::may_run_again(
            s,
            u32::try_from(attempt).unwrap_or(u32::MAX),
            error,
            lp.max_attempts,
        ),
        _ => false,
    })
}

/// Expires the active loops whose expiry has passed (`idx_loops_status_expires`).
/// Rows another transaction holds are left for the next tick rather than
/// waited on, and the rows are locked in id order, so two daemons expiring
/// at once neither wait on each other nor deadlock.
const EXPIRE_LOOPS: &str = concat!(
    "UPDATE loops SET status = 'expired', next_run_at = NULL, updated_at = $1
     WHERE id IN (SELECT id FROM loops
                  WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= $1
                  ORDER BY id FOR NO KEY UPDATE SKIP LOCKED)
       AND status = 'active' AND expires_at <= $1
     RETURNING ",
    loop_columns!()
);

/// The due active loops, earliest first (`idx_loops_status_next`).
/// Loops due at one instant come in creation order, as SQLite's `rowid`
/// gives them.
const DUE_LOOPS: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops
     WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= $1
     ORDER BY next_run_at, created_at, id LIMIT $2"
);

/// Whether a loop has a run in flight: the running runs only.
const HAS_RUNNING_RUN: &str =
    "SELECT EXISTS (SELECT 1 FROM loop_runs WHERE loop_id = $1 AND status = 'running')";

impl LoopOps for Postgres {
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
        let p = PolicyColumns::of(&lp.policy)?;
        let schedule = encode(&lp.schedule, "loop schedule")?;
        let target = encode(&lp.target, "loop target")?;
        let retry_delay_ms = big(lp.retry_delay_ms, "retryDelayMs")?;
        let lease_ms = big(lp.lease_ms, "leaseMs")?;
        let write = || {
            self.write_tx(|c| {
                c.execute(
                    "INSERT INTO loops (id, name, description, status, schedule_json, target_json,
                   next_run_at, retry_scheduled_for, catch_up, catch_up_limit, overlap,
                   max_attempts, retry_delay_ms, lease_ms, expires_at, created_at, updated_at,
                   labels, expires_after_runs, pause_after_failures, backoff, max_retry_delay_ms,
                   skip_exit_codes, on_failure, on_success, hook_show_output)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8, $9, $10, $11, $12, $13, $14, $15, $15,
                   $16::text::json, $17, $18, $19, $20, $21::text::json, $22, $23, $24)",
                &[
                    &lp.id.as_str(),
                    &lp.name,
                    &lp.description,
                    &lp.status.as_str(),
                    &Json(&schedule),
                    &Json(&target),
                    &ts_opt(lp.next_run_at),
                    &lp.catch_up.as_str(),
                    &i64::from(lp.catch_up_limit),
                    &lp.overlap.as_str(),
                    &i64::from(lp.max_attempts),
                    &retry_delay_ms,
                    &lease_ms,
                    &ts_opt(lp.expires_at),
                    &ts(now),
                    &p.labels,
                    &p.expires_after_runs,
                    &p.pause_after_failures,
                    &p.backoff,
                    &p.max_retry_delay_ms,
                    &p.skip_exit_codes,
                    &lp.hooks.on_failure,
                    &lp.hooks.on_success,
                    &i64::from(lp.hooks.hook_show_output),
                ],
                "creating a loop",
            )?;
            c.notify(lp.id.as_str())
        })
        };
        // A COMMIT cut off by a lost connection: the loop was created when
        // a row has its id, which no one else can have drawn.
        self.resolving(write, |c| Ok(query_loop(c, &lp.id)?.map(drop)))?;
        Ok(lp)
    }

    fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        self.with(|c| query_loop(c, id))
    }

    fn require_loop(&self, id_or_name: &str) -> Result<Loop> {
        if let Ok(id) = LoopId::parse(id_or_name)
            && let Some(lp) = self.get_loop(&id)?
        {
            return Ok(lp);
        }
        let named = self.with(|c| {
            c.query_vec(
                concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops WHERE name = $1 ORDER BY created_at DESC, id DESC"
                ),
                &[&id_or_name],
                ("loops", "looking up a loop by name"),
                rows::loop_row,
            )
        })?;
        crate::loops::only_named(id_or_name, named)
    }

    fn lock_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        self.with(|c| lock_loop(c, id))
    }

    fn lock_workflow_loops(&self, id: &WorkflowId) -> Result<Vec<Loop>> {
        // Every loop is read: replacing a workflow is rare, and no index
        // reaches into the target's JSON.
        self.with(|c| {
            c.query_vec(
                concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops WHERE target_json ->> 'type' = 'workflow'
                       AND target_json ->> 'workflowId' = $1 ORDER BY id FOR NO KEY UPDATE"
                ),
                &[&id.as_str()],
                ("loops", "finding a workflow's loops"),
                rows::loop_row,
            )
        })
    }

    fn update_loop(&self, update: &LoopUpdate<'_>) -> Result<Loop> {
        edit::update_loop(self, update)
    }

    fn for_each_loop(
        &self,
        filter: &LoopFilter,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        let limit = i64::from(filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT));
        let what = ("loops", "listing loops");
        self.with(|c| match filter.status {
            Some(status) => c.query_each(
                concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops WHERE status = $1
                     ORDER BY next_run_at NULLS FIRST, id LIMIT $2"
                ),
                &[&status.as_str(), &limit],
                what,
                rows::loop_row,
                &mut *each,
            ),
            None => c.query_each(
                concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops ORDER BY status, next_run_at NULLS FIRST, id LIMIT $1"
                ),
                &[&limit],
                what,
                rows::loop_row,
                &mut *each,
            ),
        })
    }

    fn for_each_labeled_loop(
        &self,
        filter: &LoopFilter,
        labels: &str,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        edit::for_each_labeled_loop(self, filter, labels, each)
    }

    fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        self.count_status("loops", status.map(LoopStatus::as_str))
    }

    fn count_runs(&self, status: Option<RunStatus>) -> Result<u64> {
        self.count_status("loop_runs", status.map(RunStatus::as_str))
    }

    fn recount_statuses(&self) -> Result<bool> {
        self.write_tx(|c| {
            // Writers of loops and runs update the counts in their own
            // transactions: holding the counts table still while counting
            // makes the count and the kept counts describe the same rows.
            c.batch(
                "LOCK TABLE status_counts IN EXCLUSIVE MODE",
                "locking the kept counts",
            )?;
            let row = c.query_one(COUNTS_DIFFER, &[], "comparing the kept counts")?;
            let stale: bool = row
                .try_get(0)
                .map_err(StoreError::db("comparing the kept counts"))?;
            if stale {
                c.batch(RECOUNT, "recounting loops and runs")?;
            }
            Ok(stale)
        })
    }

    fn has_running_run(&self, loop_id: &LoopId) -> Result<bool> {
        self.with(|c| {
            let row = c.query_one(
                HAS_RUNNING_RUN,
                &[&loop_id.as_str()],
                "checking for a running run",
            )?;
            row.try_get(0)
                .map_err(StoreError::db("checking for a running run"))
        })
    }

    fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>> {
        self.with(|c| {
            c.query_vec(
                DUE_LOOPS,
                &[&ts(now), &i64::from(limit)],
                ("loops", "selecting due loops"),
                rows::loop_row,
            )
        })
    }

    fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        // A user's pause gives no reason: one left over from an automatic
        // pause goes.
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
        self.write_tx(|c| {
            let lp = lock_loop(c, id)?.ok_or_else(|| not_found(id.as_str()))?;
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
                && once_slot_is_spent(c, &lp, at)?
            {
                return refuse(lp, Refusal::NothingToRun);
            }
            let changed = loop_returning(
                c,
                concat!(
                    "UPDATE loops SET status = 'active', next_run_at = $3, retry_scheduled_for = $4,
                       paused_reason = NULL, consecutive_failures = 0,
                       consecutive_successes = CASE WHEN status = 'expired' THEN 0
                         ELSE consecutive_successes END,
                       updated_at = $5
                     WHERE id = $1 AND status = $2 RETURNING ",
                    loop_columns!()
                ),
                &[
                    &id.as_str(),
                    &lp.status.as_str(),
                    &ts(next),
                    &ts_opt(retry),
                    &ts(now),
                ],
                "resuming a loop",
            )?;
            // The row is locked since the read, so the guard matches.
            let lp = changed.ok_or_else(|| StoreError::Vanished {
                kind: "loop",
                op: "resume",
                id: id.to_string(),
            })?;
            c.notify(id.as_str())?;
            Ok(LoopChange::Changed(lp))
        })
    }

    fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        let changed = self.with(|c| {
            loop_returning(
                c,
                concat!(
                    "UPDATE loops SET status = 'stopped', next_run_at = NULL,
                       retry_scheduled_for = NULL, updated_at = $2
                     WHERE id = $1 AND status <> 'stopped' RETURNING ",
                    loop_columns!()
                ),
                &[&id.as_str(), &ts(now)],
                "stopping a loop",
            )
        })?;
        if let Some(lp) = changed {
            return Ok(LoopChange::Changed(lp));
        }
        let lp = self.get_loop(id)?.ok_or_else(|| not_found(id.as_str()))?;
        Ok(LoopChange::Already(lp))
    }

    fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>> {
        self.with(|c| {
            c.query_vec(
                EXPIRE_LOOPS,
                &[&ts(now)],
                ("loops", "expiring loops"),
                rows::loop_row,
            )
        })
    }

    fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome> {
        self.write_tx(|c| {
            // `FOR UPDATE`: the row is about to be deleted.
            let found = c.query(
                "SELECT id FROM loops WHERE id = $1 FOR UPDATE",
                &[&id.as_str()],
                "locking a loop",
            )?;
            if found.is_empty() {
                return Ok(DeleteOutcome::NotFound);
            }
            // The links are cleared explicitly, as on SQLite, so the outcome
            // does not depend on the foreign keys' `ON DELETE SET NULL`.
            let (unlinked, runs) = match history {
                DeleteHistory::Keep => {
                    let unlinked = c.execute(
                        "UPDATE workflow_runs SET loop_id = NULL WHERE loop_id = $1",
                        &[&id.as_str()],
                        "unlinking workflow runs",
                    )?;
                    (unlinked, 0)
                }
                DeleteHistory::Purge => {
                    let unlinked = c.execute(
                        "UPDATE workflow_runs SET loop_id = NULL, loop_run_id = NULL
                         WHERE loop_id = $1
                            OR loop_run_id IN (SELECT id FROM loop_runs WHERE loop_id = $1)",
                        &[&id.as_str()],
                        "unlinking workflow runs",
                    )?;
                    let runs = c.execute(
                        "DELETE FROM loop_runs WHERE loop_id = $1",
                        &[&id.as_str()],
                        "deleting runs",
                    )?;
                    (unlinked, runs)
                }
            };
            c.execute(
                "DELETE FROM loops WHERE id = $1",
                &[&id.as_str()],
                "deleting a loop",
            )?;
            Ok(DeleteOutcome::Deleted {
                runs_deleted: runs,
                workflow_runs_unlinked: unlinked,
            })
        })
    }
}

impl Postgres {
    /// Pauses `id` if it is active, recording `reason` (or none).
    fn pause_active(
        &self,
        id: &LoopId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.with(|c| {
            loop_returning(
                c,
                concat!(
                    "UPDATE loops SET status = 'paused', paused_reason = $2, updated_at = $3
                     WHERE id = $1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                &[&id.as_str(), &reason, &ts(now)],
                "pausing a loop",
            )
        })
    }

    /// Rows of `table` (with `status`, or all), from the counts V6's
    /// triggers keep: a few rows read, however many are stored.
    fn count_status(&self, table: &'static str, status: Option<&str>) -> Result<u64> {
        let context = if table == "loops" {
            "counting loops"
        } else {
            "counting runs"
        };
        self.with(|c| {
            let row = c.query_one(
                "SELECT COALESCE(SUM(n), 0)::bigint FROM status_counts
                 WHERE tbl = $1 AND ($2::text IS NULL OR status = $2)",
                &[&table, &status],
                context,
            )?;
            count(&row, 0)
        })
    }
}

/// Every row counted by status, as V6's triggers keep it.
macro_rules! counted {
    () => {
        "SELECT 'loops'::text AS tbl, status, COUNT(*) AS n FROM loops GROUP BY status
         UNION ALL SELECT 'loop_runs'::text, status, COUNT(*) FROM loop_runs GROUP BY status"
    };
}

/// Whether the kept counts differ from a real count (a zero kept count is
/// the same as none).
const COUNTS_DIFFER: &str = concat!(
    "WITH actual AS (",
    counted!(),
    "), kept AS (SELECT tbl, status, SUM(n) FROM status_counts GROUP BY tbl, status
                 HAVING SUM(n) <> 0)
     SELECT EXISTS (SELECT * FROM actual EXCEPT SELECT * FROM kept)
         OR EXISTS (SELECT * FROM kept EXCEPT SELECT * FROM actual)"
);

/// Rewrites the kept counts from a real count.
const RECOUNT: &str = concat!(
    "DELETE FROM status_counts; INSERT INTO status_counts (tbl, status, n) ",
    counted!(),
    ";"
);
