//! The `loops` table's operations ([`LoopOps`]), written once for both
//! backends over [`Db`]: each reads, asks a decision of `decide.rs`, and
//! writes what it returns with a statement of `statements.rs`.
//!
//! A status change is one guarded `UPDATE … WHERE id AND status …` (pause,
//! stop, expire), or a read and a guarded write in one write transaction
//! (resume, edit, delete): SQLite's `BEGIN IMMEDIATE` holds the write lock
//! from the read on, and on PostgreSQL the read locks the loop's row
//! ([`lock_loop`]), which serializes every writer of that loop. A write
//! that makes a loop runnable (create, resume, edit) wakes PostgreSQL's
//! daemons when it commits.

use std::ops::ControlFlow;

use loops_core::validate_new_loop;
use loops_core::{Loop, LoopId, LoopStatus, NewLoop, RunStatus, Timestamp, WorkflowId};

use super::decide::{self, Resume};
use super::statements::*;
use crate::backend::{LoopOps, Transactions};
use crate::columns::{self, loop_row};
use crate::error::{DbError, Result, StoreError};
use crate::loops::first_run;
use crate::loops::{
    DEFAULT_LOOP_LIMIT, DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, LoopUpdate,
    PolicyColumns, Refusal,
};
use crate::random_id_bytes;
use crate::sql::{self, Db, Dialect, Sql, Value};

/// Reads one loop by id on `c`, inside or outside a transaction.
pub(crate) fn read_loop(c: &mut dyn Sql, id: &LoopId) -> Result<Option<Loop>> {
    c.query_opt(
        LOOP_BY_ID,
        &[id.as_str().into()],
        ("loops", "reading a loop"),
        loop_row,
    )
}

/// Reads one loop by id for an operation that decides from its state and
/// then writes; `None` when the loop does not exist.
///
/// On SQLite the write transaction already holds the write lock. On
/// PostgreSQL the row is locked until the transaction ends, so the writers
/// of one loop (claims, advances, skips, resumes, settles, recoveries)
/// run one at a time. `FOR NO KEY UPDATE` rather than `FOR UPDATE`: it
/// excludes every other writer of the row just the same, but not the
/// key-share lock a foreign key check takes, so starting a workflow run
/// that references the loop does not wait for it.
pub(crate) fn lock_loop(c: &mut dyn Sql, id: &LoopId) -> Result<Option<Loop>> {
    c.query_opt(
        c.dialect().pick(LOOP_BY_ID, LOCK_LOOP_PG),
        &[id.as_str().into()],
        ("loops", "locking a loop"),
        loop_row,
    )
}

/// Runs `write` in a write transaction. When it fails with the connection
/// lost (PostgreSQL: the COMMIT may have landed or not) and it owned its
/// transaction, asks `landed` on a fresh connection whether it was
/// committed after all, and returns what `landed` found; otherwise, or
/// when `landed` finds nothing or fails, the original error. A SQLite
/// error never leaves the outcome unknown.
pub(crate) fn write_resolving<D: Db + Transactions, T>(
    db: &D,
    write: impl FnOnce(&mut dyn Sql) -> Result<T>,
    landed: impl FnOnce(&mut dyn Sql) -> Result<Option<T>>,
) -> Result<T> {
    let owned = !db.in_transaction();
    match db.write(write) {
        Err(e) if owned && outcome_unknown(&e) => match db.read(landed) {
            Ok(Some(found)) => Ok(found),
            _ => Err(e),
        },
        other => other,
    }
}

/// True when `e` means the connection was lost, so that a COMMIT sent on
/// it may have landed or not.
fn outcome_unknown(e: &StoreError) -> bool {
    match e {
        StoreError::ConnectionLost => true,
        _ => e.db_error().is_some_and(DbError::is_connection_lost),
    }
}

/// The text of a statement for `c`'s dialect, from its SQLite and
/// PostgreSQL texts.
fn on(c: &dyn Sql, [sqlite, postgres]: [&'static str; 2]) -> &'static str {
    c.dialect().pick(sqlite, postgres)
}

fn encode<T: serde::Serialize>(value: &T, what: &str) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Encode(format!("{what}: {e}")))
}

/// A millisecond setting as both schemas' signed 64-bit integer.
fn big(ms: u64, what: &str) -> Result<i64> {
    i64::try_from(ms).map_err(|_| StoreError::Encode(format!("{what}: {ms} is too large")))
}

fn not_found(key: &str) -> StoreError {
    StoreError::NotFound {
        kind: "loop",
        key: key.to_owned(),
    }
}

fn vanished(op: &'static str, id: &LoopId) -> StoreError {
    StoreError::Vanished {
        kind: "loop",
        op,
        id: id.to_string(),
    }
}

/// The run in a `once` loop's only slot, `at`, can never be claimed again.
fn once_slot_is_spent(c: &mut dyn Sql, lp: &Loop, at: Timestamp) -> Result<bool> {
    let found = c.query_opt(
        SLOT_RUN,
        &[lp.id.as_str().into(), at.into()],
        ("loop_runs", "reading a once loop's run"),
        |row| {
            let n = ["status", "attempt", "error"];
            Ok((
                columns::text(row, &n, 0)?,
                columns::int::<i64>(row, &n, 1)?,
                columns::text_opt(row, &n, 2)?,
            ))
        },
    )?;
    Ok(found.is_some_and(|(status, attempt, error)| {
        let attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
        decide::slot_is_spent(&status, attempt, error.as_deref(), lp.max_attempts)
    }))
}

/// True when `sql` returns a row.
pub(crate) fn any_row(
    c: &mut dyn Sql,
    sql: &str,
    params: &[Value<'_>],
    what: &'static str,
) -> Result<bool> {
    let mut found = false;
    c.query_rows(sql, params, what, &mut |_| {
        found = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(found)
}

/// Rows of `table` (with `status`, or all), from the kept counts.
fn count_status<D: Db>(db: &D, table: &'static str, status: Option<&str>) -> Result<u64> {
    let what = if table == "loops" {
        "counting loops"
    } else {
        "counting runs"
    };
    let n = db.read(|c| {
        let sql = c.dialect().pick(COUNT_STATUS, COUNT_STATUS_PG);
        c.query_int(sql, &[table.into(), status.into()], what)
    })?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Pauses `id` if it is active, recording `reason` (or none): one guarded
/// statement, outside any transaction of its own.
fn pause_active<D: Db>(
    db: &D,
    id: &LoopId,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<Option<Loop>> {
    db.read(|c| {
        let paused = c.query_opt(
            PAUSE,
            &[id.as_str().into(), reason.into(), now.into()],
            ("loops", "pausing a loop"),
            loop_row,
        )?;
        // Listeners (daemons, dashboards) hear of it once it is committed.
        if paused.is_some() {
            c.notify(id.as_str())?;
        }
        Ok(paused)
    })
}

/// The advisory lock that serializes `loops apply` runs on PostgreSQL:
/// "loopsapp" as a big-endian i64.
const APPLY_LOCK_KEY: i64 = 0x6c6f_6f70_7361_7070;

impl<D: Db + Transactions> LoopOps for D {
    fn lock_applies(&self) -> Result<()> {
        self.write(|c| {
            if c.dialect() == Dialect::Postgres {
                c.execute(
                    "SELECT pg_advisory_xact_lock(?1)",
                    &[APPLY_LOCK_KEY.into()],
                    "waiting for another loops apply",
                )?;
            }
            Ok(())
        })
    }

    fn create_loop(&self, new: &NewLoop, now: Timestamp) -> Result<Loop> {
        validate_new_loop(new)?;
        let next_run_at = first_run(new, now)?;
        let id = LoopId::from_bytes(random_id_bytes());
        let lp = decide::new_loop(new, id, next_run_at, now);
        let schedule = encode(&lp.schedule, "loop schedule")?;
        let target = encode(&lp.target, "loop target")?;
        let p = PolicyColumns::of(&lp.policy)?;
        let params: [Value<'_>; 15] = [
            lp.id.as_str().into(),
            lp.name.as_str().into(),
            lp.description.as_deref().into(),
            lp.status.as_str().into(),
            sql::json(schedule.as_str()),
            sql::json(target.as_str()),
            lp.next_run_at.into(),
            lp.catch_up.as_str().into(),
            lp.catch_up_limit.into(),
            lp.overlap.as_str().into(),
            lp.max_attempts.into(),
            big(lp.retry_delay_ms, "retryDelayMs")?.into(),
            big(lp.lease_ms, "leaseMs")?.into(),
            lp.expires_at.into(),
            now.into(),
        ];
        let params: Vec<Value<'_>> = params.into_iter().chain(p.values(&lp.hooks)).collect();
        // A COMMIT cut off by a lost connection: the loop was created when
        // a row has its id, which no one else can have drawn.
        write_resolving(
            self,
            |c| {
                c.execute(INSERT_LOOP, &params, "creating a loop")?;
                c.notify(lp.id.as_str())
            },
            |c| Ok(read_loop(c, &lp.id)?.map(drop)),
        )?;
        Ok(lp)
    }

    fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        self.read(|c| read_loop(c, id))
    }

    fn require_loop(&self, id_or_name: &str) -> Result<Loop> {
        if let Ok(id) = LoopId::parse(id_or_name)
            && let Some(lp) = self.get_loop(&id)?
        {
            return Ok(lp);
        }
        let named = self.read(|c| {
            c.query_vec(
                on(c, LOOPS_NAMED),
                &[id_or_name.into()],
                ("loops", "looking up a loop by name"),
                loop_row,
            )
        })?;
        crate::loops::only_named(id_or_name, named)
    }

    fn lock_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        self.read(|c| lock_loop(c, id))
    }

    fn lock_workflow_loops(&self, id: &WorkflowId) -> Result<Vec<Loop>> {
        self.read(|c| {
            c.query_vec(
                on(c, WORKFLOW_LOOPS),
                &[id.as_str().into()],
                ("loops", "finding a workflow's loops"),
                loop_row,
            )
        })
    }

    fn update_loop(&self, update: &LoopUpdate<'_>) -> Result<Loop> {
        let s = update.settings;
        let p = PolicyColumns::of(&s.policy)?;
        let (reschedule, next) = match update.reschedule {
            Some(next) => (true, next),
            None => (false, None),
        };
        let schedule = encode(&s.schedule, "loop schedule")?;
        let target = encode(&s.target, "loop target")?;
        let params: [Value<'_>; 16] = [
            update.id.as_str().into(),
            update.status.as_str().into(),
            s.name.as_str().into(),
            s.description.as_deref().into(),
            sql::json(schedule.as_str()),
            sql::json(target.as_str()),
            s.catch_up.as_str().into(),
            s.catch_up_limit.into(),
            s.overlap.as_str().into(),
            s.max_attempts.into(),
            big(s.retry_delay_ms, "retryDelayMs")?.into(),
            big(s.lease_ms, "leaseMs")?.into(),
            s.expires_at.into(),
            reschedule.into(),
            next.into(),
            update.now.into(),
        ];
        let params: Vec<Value<'_>> = params.into_iter().chain(p.values(&s.hooks)).collect();
        // Both callers (`Store::edit_loop`, `Store::replace_workflow`) hold
        // the write lock or the loop's row lock since their read, so the
        // guard matches.
        self.write(|c| {
            let lp = c
                .query_opt(UPDATE_LOOP, &params, ("loops", "editing a loop"), loop_row)?
                .ok_or_else(|| vanished("edit", update.id))?;
            c.notify(update.id.as_str())?;
            Ok(lp)
        })
    }

    fn for_each_loop(
        &self,
        filter: &LoopFilter,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        let limit = filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT);
        let offset = filter.offset.unwrap_or(0);
        let what = ("loops", "listing loops");
        self.read(|c| match filter.status {
            Some(status) => c.query_each(
                on(c, LIST_BY_STATUS),
                &[status.as_str().into(), limit.into(), offset.into()],
                what,
                loop_row,
                each,
            ),
            None => c.query_each(
                on(c, LIST_ALL),
                &[limit.into(), offset.into()],
                what,
                loop_row,
                each,
            ),
        })
    }

    fn for_each_labeled_loop(
        &self,
        filter: &LoopFilter,
        labels: &str,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        let params = [
            filter.status.map(LoopStatus::as_str).into(),
            filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT).into(),
            labels.into(),
            filter.offset.unwrap_or(0).into(),
        ];
        self.read(|c| {
            let sql = on(c, LIST_LABELED);
            c.query_each(sql, &params, ("loops", "listing loops"), loop_row, each)
        })
    }

    fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        count_status(self, "loops", status.map(LoopStatus::as_str))
    }

    fn count_runs(&self, status: Option<RunStatus>) -> Result<u64> {
        count_status(self, "loop_runs", status.map(RunStatus::as_str))
    }

    fn recount_statuses(&self) -> Result<bool> {
        self.write(|c| {
            if c.dialect() == Dialect::Postgres {
                c.execute(LOCK_COUNTS_PG, &[], "locking the kept counts")?;
            }
            let sql = on(c, COUNTS_DIFFER);
            let stale = c.query_int(sql, &[], "comparing the kept counts")? != 0;
            if stale {
                let what = "recounting loops and runs";
                c.execute(CLEAR_COUNTS, &[], what)?;
                c.execute(on(c, RECOUNT), &[], what)?;
            }
            Ok(stale)
        })
    }

    fn has_running_run(&self, loop_id: &LoopId) -> Result<bool> {
        self.read(|c| {
            let sql = c.dialect().pick(HAS_RUNNING_RUN, HAS_RUNNING_RUN_PG);
            let what = "checking for a running run";
            Ok(c.query_int(sql, &[loop_id.as_str().into()], what)? != 0)
        })
    }

    fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>> {
        self.read(|c| {
            c.query_vec(
                c.dialect().pick(DUE_LOOPS, DUE_LOOPS_PG),
                &[now.into(), limit.into()],
                ("loops", "selecting due loops"),
                loop_row,
            )
        })
    }

    fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        // A user's pause gives no reason: one left over from an automatic
        // pause (which another implementation's resume would not clear) goes.
        if let Some(lp) = pause_active(self, id, None, now)? {
            return Ok(LoopChange::Changed(lp));
        }
        let lp = self.get_loop(id)?.ok_or_else(|| not_found(id.as_str()))?;
        Ok(decide::pause_unchanged(lp))
    }

    fn pause_loop_with_reason(
        &self,
        id: &LoopId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        pause_active(self, id, Some(reason), now)
    }

    fn resume_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        self.write(|c| {
            let lp = lock_loop(c, id)?.ok_or_else(|| not_found(id.as_str()))?;
            let refuse = |loop_, reason| Ok(LoopChange::Refused { loop_, reason });
            let (next, retry) = match decide::resume(&lp, now)? {
                Resume::Already => return Ok(LoopChange::Already(lp)),
                Resume::Refused(reason) => return refuse(lp, reason),
                Resume::Write {
                    once_slot: Some(at),
                    ..
                } if once_slot_is_spent(c, &lp, at)? => {
                    return refuse(lp, Refusal::NothingToRun);
                }
                Resume::Write { next, retry, .. } => (next, retry),
            };
            let params = [
                id.as_str().into(),
                lp.status.as_str().into(),
                next.into(),
                retry.into(),
                now.into(),
            ];
            // The write lock or the row lock is held since the read, so
            // the guard matches.
            let lp = c
                .query_opt(RESUME, &params, ("loops", "resuming a loop"), loop_row)?
                .ok_or_else(|| vanished("resume", id))?;
            c.notify(id.as_str())?;
            Ok(LoopChange::Changed(lp))
        })
    }

    fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        let changed = self.read(|c| {
            let stopped = c.query_opt(
                STOP,
                &[id.as_str().into(), now.into()],
                ("loops", "stopping a loop"),
                loop_row,
            )?;
            if stopped.is_some() {
                c.notify(id.as_str())?;
            }
            Ok(stopped)
        })?;
        if let Some(lp) = changed {
            return Ok(LoopChange::Changed(lp));
        }
        let lp = self.get_loop(id)?.ok_or_else(|| not_found(id.as_str()))?;
        Ok(decide::stop_unchanged(lp))
    }

    fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>> {
        self.read(|c| {
            c.query_vec(
                c.dialect().pick(EXPIRE_LOOPS, EXPIRE_LOOPS_PG),
                &[now.into()],
                ("loops", "expiring loops"),
                loop_row,
            )
        })
    }

    fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome> {
        let key = [id.as_str().into()];
        self.write(|c| {
            let lock = on(c, LOCK_FOR_DELETE);
            if !any_row(c, lock, &key, "locking a loop")? {
                return Ok(DeleteOutcome::NotFound);
            }
            // The links are cleared explicitly rather than left to the
            // schema's `ON DELETE SET NULL`, so the outcome is the same
            // whether or not the connection enforces foreign keys.
            let unlinking = "unlinking workflow runs";
            let (unlinked, runs) = match history {
                DeleteHistory::Keep => (c.execute(UNLINK_LOOP, &key, unlinking)?, 0),
                DeleteHistory::Purge => (
                    c.execute(UNLINK_LOOP_AND_RUNS, &key, unlinking)?,
                    c.execute(DELETE_RUNS, &key, "deleting runs")?,
                ),
            };
            // Its pending triggers would wait for a loop that is gone
            // (issue 30); the claimed ones name runs that are kept.
            c.execute(
                "DELETE FROM loop_triggers WHERE loop_id = ?1 AND run_id IS NULL",
                &key,
                "deleting a loop's pending triggers",
            )?;
            c.execute(DELETE_LOOP, &key, "deleting a loop")?;
            c.notify(id.as_str())?;
            Ok(DeleteOutcome::Deleted {
                runs_deleted: runs,
                workflow_runs_unlinked: unlinked,
            })
        })
    }
}

#[cfg(test)]
mod tests;
