//! Loop rows: creation, lookups, listing, the guarded status changes
//! (pause, resume, stop, expire) and deletion (SPEC §4.3 "Loops", §1.5).
//!
//! Invariant: no status change is a blind read-merge-write (SPEC §9 item 8).
//! Each one is a single `UPDATE … WHERE id = ? AND status …` or one
//! `BEGIN IMMEDIATE` transaction, so a concurrent advance can never undo a
//! pause and a pause can never undo a stop.

use std::fmt;
use std::ops::ControlFlow;

use loops_core::{
    Loop, LoopId, LoopStatus, NewLoop, RunStatus, Schedule, Timestamp, initial_next_run,
    validate_new_loop,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Result, StoreError};
use crate::rows::{self, ts, ts_opt};
use crate::{Store, random_id_bytes};

/// The default `limit` of [`Store::list_loops`] (SPEC §4.3).
pub const DEFAULT_LOOP_LIMIT: u32 = 200;

/// What [`Store::list_loops`] returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopFilter {
    /// Only loops with this status.
    pub status: Option<LoopStatus>,
    /// At most this many loops; [`DEFAULT_LOOP_LIMIT`] when unset.
    pub limit: Option<u32>,
}

/// The result of a guarded status change (pause, resume, stop).
#[derive(Debug, Clone, PartialEq)]
pub enum LoopChange {
    /// The loop changed; this is the row as stored after the change.
    Changed(Loop),
    /// The loop was already in the requested state; nothing was written.
    Already(Loop),
    /// The change does not apply to the loop's current state; nothing was
    /// written. The loop is the row as stored.
    Refused {
        /// The loop, unchanged.
        loop_: Loop,
        /// Why the change does not apply.
        reason: Refusal,
    },
}

impl LoopChange {
    /// The loop as stored after the call, whatever the outcome.
    pub fn loop_(&self) -> &Loop {
        match self {
            LoopChange::Changed(l)
            | LoopChange::Already(l)
            | LoopChange::Refused { loop_: l, .. } => l,
        }
    }
}

/// Why a status change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Only an active loop can be paused; a stopped or expired loop stays
    /// as it is.
    NotActive,
    /// The loop's `expiresAt` has passed, so resuming it would only expire
    /// it again at the next tick.
    PastExpiry,
    /// The schedule has no slot left to run: a `once` loop whose slot has
    /// already run to completion.
    NothingToRun,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::NotActive => "only an active loop can be paused",
            Refusal::PastExpiry => "the loop is past its expiry and cannot be resumed",
            Refusal::NothingToRun => "the loop's schedule has no run left",
        })
    }
}

/// What [`Store::delete_loop`] does with the loop's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteHistory {
    /// Delete the loop row but keep its runs, as the original does (SPEC
    /// §4.3 `deleteLoop`, §9 item 34): they stay listable by loop id. Linked
    /// workflow runs lose their `loop_id` (as the schema's `ON DELETE SET
    /// NULL` intends) but keep their `loop_run_id`, which still leads to the
    /// kept run.
    Keep,
    /// Also delete every run of the loop, and unlink the workflow runs that
    /// pointed at the loop or its runs (`loop_id` and `loop_run_id` become
    /// NULL). A runner still executing one of the deleted runs gets `run not
    /// found after finalize` when it finishes.
    Purge,
}

/// The result of [`Store::delete_loop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The loop row was deleted.
    Deleted {
        /// Runs deleted with it (0 under [`DeleteHistory::Keep`]).
        runs_deleted: u64,
        /// Workflow runs whose link to the loop was cleared.
        workflow_runs_unlinked: u64,
    },
    /// No loop has that id; nothing was written.
    NotFound,
}

/// Reads one loop by id on `conn` (inside or outside a transaction).
pub(crate) fn query_loop(conn: &Connection, id: &LoopId) -> Result<Option<Loop>> {
    loop_returning(
        conn,
        "SELECT * FROM loops WHERE id = ?1",
        [id.as_str()],
        "reading a loop",
    )
}

/// Runs a statement that returns loop rows (`SELECT` or `… RETURNING *`).
fn loops_from(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    context: &'static str,
) -> Result<Vec<Loop>> {
    rows::query_vec(conn, sql, params, ("loops", context), rows::loop_row)
}

/// Runs a statement returning at most one loop row (`SELECT` or a
/// single-row `UPDATE … RETURNING *`).
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

impl Store {
    /// Creates a loop (SPEC §2.3, §7.3).
    ///
    /// The input is validated and the first `nextRunAt` computed before
    /// anything is written; on any error no row exists.
    pub fn create_loop(&self, new: &NewLoop, now: Timestamp) -> Result<Loop> {
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
        };
        let schedule = encode(&lp.schedule, "loop schedule")?;
        let target = encode(&lp.target, "loop target")?;
        self.conn
            .execute(
                "INSERT INTO loops (id, name, description, status, schedule_json, target_json,
                   next_run_at, retry_scheduled_for, catch_up, catch_up_limit, overlap,
                   max_attempts, retry_delay_ms, lease_ms, expires_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15)",
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
                ],
            )
            .map_err(StoreError::db("creating a loop"))?;
        Ok(lp)
    }

    /// The loop with this id, if any.
    pub fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        query_loop(&self.conn, id)
    }

    /// Resolves `id_or_name`: first as an id, then as a name, the newest
    /// loop of that name winning (SPEC §4.3 `requireLoop`, §10 item 34).
    ///
    /// Fails with `loop not found: <x>`.
    pub fn require_loop(&self, id_or_name: &str) -> Result<Loop> {
        if let Ok(id) = LoopId::parse(id_or_name)
            && let Some(lp) = self.get_loop(&id)?
        {
            return Ok(lp);
        }
        loop_returning(
            &self.conn,
            "SELECT * FROM loops WHERE name = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1",
            [id_or_name],
            "looking up a loop by name",
        )?
        .ok_or_else(|| not_found(id_or_name))
    }

    /// Lists loops (SPEC §4.3 `listLoops`): with a status filter sorted by
    /// `next_run_at`, without one by status then `next_run_at`; NULLs first.
    pub fn list_loops(&self, filter: &LoopFilter) -> Result<Vec<Loop>> {
        let mut all = Vec::new();
        self.for_each_loop(filter, |lp| {
            all.push(lp);
            ControlFlow::Continue(())
        })?;
        Ok(all)
    }

    /// [`Store::list_loops`], handing each loop to `each` as its row is
    /// read, so the caller can print the first loops while later rows are
    /// still being decoded. `each` returns [`ControlFlow::Break`] to stop
    /// the listing early.
    pub fn for_each_loop(
        &self,
        filter: &LoopFilter,
        each: impl FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        let limit = filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT);
        let what = ("loops", "listing loops");
        match filter.status {
            Some(status) => rows::query_each(
                &self.conn,
                "SELECT * FROM loops WHERE status = ?1 ORDER BY next_run_at, rowid LIMIT ?2",
                params![status.as_str(), limit],
                what,
                rows::loop_row,
                each,
            ),
            None => rows::query_each(
                &self.conn,
                "SELECT * FROM loops ORDER BY status, next_run_at, rowid LIMIT ?1",
                [limit],
                what,
                rows::loop_row,
                each,
            ),
        }
    }

    /// Counts loops, optionally by status.
    pub fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        let n: i64 = match status {
            Some(s) => self.conn.query_row(
                "SELECT COUNT(*) FROM loops WHERE status = ?1",
                [s.as_str()],
                |r| r.get(0),
            ),
            None => self
                .conn
                .query_row("SELECT COUNT(*) FROM loops", [], |r| r.get(0)),
        }
        .map_err(StoreError::db("counting loops"))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Counts runs, optionally by status.
    pub fn count_runs(&self, status: Option<RunStatus>) -> Result<u64> {
        let n: i64 = match status {
            Some(s) => self.conn.query_row(
                "SELECT COUNT(*) FROM loop_runs WHERE status = ?1",
                [s.as_str()],
                |r| r.get(0),
            ),
            None => self
                .conn
                .query_row("SELECT COUNT(*) FROM loop_runs", [], |r| r.get(0)),
        }
        .map_err(StoreError::db("counting runs"))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// True when the loop has a run in state `running` (the overlap check).
    pub fn has_running_run(&self, loop_id: &LoopId) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM loop_runs WHERE loop_id = ?1 AND status = 'running')",
                [loop_id.as_str()],
                |r| r.get(0),
            )
            .map_err(StoreError::db("checking for a running run"))
    }

    /// The active loops whose `next_run_at` is at or before `now`, earliest
    /// first (SPEC §3.1 step 4; served by `idx_loops_status_next`).
    pub fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>> {
        loops_from(
            &self.conn,
            "SELECT * FROM loops
             WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ?1
             ORDER BY next_run_at, rowid LIMIT ?2",
            params![ts(now), limit],
            "selecting due loops",
        )
    }

    /// Pauses an active loop, keeping `nextRunAt` and any pending retry.
    ///
    /// One guarded `UPDATE … WHERE status = 'active'`. A paused loop is
    /// reported [`LoopChange::Already`]; a stopped or expired loop is
    /// [`Refusal::NotActive`] (the original pauses those blindly, which only
    /// made them resumable with no next run, SPEC §9 item 33).
    pub fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
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

    /// Pauses an active loop on loops' own initiative, recording `reason`
    /// (a stored schedule that can no longer be planned, such as a cron
    /// expression or time zone another implementation accepted). One guarded
    /// `UPDATE … WHERE status = 'active'`; `None` when the loop is no longer
    /// active (or gone), and nothing was written.
    pub fn pause_loop_with_reason(
        &self,
        id: &LoopId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.pause_active(id, Some(reason), now)
    }

    /// Pauses `id` if it is active, recording `reason` (or none).
    fn pause_active(
        &self,
        id: &LoopId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        loop_returning(
            &self.conn,
            "UPDATE loops SET status = 'paused', paused_reason = ?2, updated_at = ?3
             WHERE id = ?1 AND status = 'active' RETURNING *",
            params![id.as_str(), reason, ts(now)],
            "pausing a loop",
        )
    }

    /// Makes a paused, stopped or expired loop active again.
    ///
    /// SPEC §9 item 33: the original keeps `nextRunAt`, so a stopped loop
    /// (whose `nextRunAt` was cleared) stays inert. Here a paused loop keeps
    /// its `nextRunAt` and pending retry (missed slots are then handled by
    /// its catch-up policy), while a loop without a `nextRunAt`, or one that
    /// was stopped or expired, gets a fresh one from its schedule as if
    /// created at `now`, with no pending retry.
    ///
    /// Refused, with nothing written, when the loop is past its `expiresAt`
    /// or when a `once` loop's slot has already run to completion. The read
    /// and the guarded write share one `BEGIN IMMEDIATE` transaction.
    pub fn resume_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
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
                "UPDATE loops SET status = 'active', next_run_at = ?3, retry_scheduled_for = ?4,
                   paused_reason = NULL, updated_at = ?5
                 WHERE id = ?1 AND status = ?2 RETURNING *",
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

    /// Stops a loop: status stopped, `nextRunAt` and `retryScheduledFor`
    /// cleared (SPEC §1.5, §10 item 93). One guarded `UPDATE`.
    pub fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        let changed = loop_returning(
            &self.conn,
            "UPDATE loops SET status = 'stopped', next_run_at = NULL, retry_scheduled_for = NULL,
               updated_at = ?2
             WHERE id = ?1 AND status <> 'stopped' RETURNING *",
            params![id.as_str(), ts(now)],
            "stopping a loop",
        )?;
        if let Some(lp) = changed {
            return Ok(LoopChange::Changed(lp));
        }
        let lp = self.get_loop(id)?.ok_or_else(|| not_found(id.as_str()))?;
        Ok(LoopChange::Already(lp))
    }

    /// Expires every active loop whose `expiresAt` is at or before `now`:
    /// status expired, `nextRunAt` cleared, `retryScheduledFor` kept
    /// (SPEC §2.6). One statement; returns the expired loops.
    pub fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>> {
        loops_from(
            &self.conn,
            "UPDATE loops SET status = 'expired', next_run_at = NULL, updated_at = ?1
             WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ?1
             RETURNING *",
            [ts(now)],
            "expiring loops",
        )
    }

    /// Deletes a loop, keeping or purging its history as `history` says.
    ///
    /// Under [`DeleteHistory::Purge`] the loop row, its runs and the links of
    /// its workflow runs go in one `BEGIN IMMEDIATE` transaction, so no
    /// reader sees a half-deleted loop.
    pub fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome> {
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
