//! Lease recovery, written once over [`Db`] for both backends: the
//! candidates, and in each candidate's own write transaction the guarded
//! abandon, decided by the takeover rule
//! ([`takeover`]).
//!
//! On PostgreSQL daemons sharing the database sweep at once, so each
//! candidate is taken with `FOR NO KEY UPDATE SKIP LOCKED`, its loop first
//! and then the run (the order every writer of a loop locks in): a
//! candidate another daemon is recovering, or a runner is claiming or
//! finalizing right now, is skipped rather than waited on, and the next
//! sweep sees how that ended. SQLite's write lock serializes the sweeps.
//! Either way the write re-checks the row (still running, lease expired
//! by the cutoff, same claimant), so a run is recovered once, and never
//! after it finished.

use loops_core::{Loop, LoopId, LoopRun, RunId, Timestamp, WorkflowRunId};

use super::Recovered;
use crate::backend::RecoveryOps;
use crate::columns::{self, parsed, run_columns};
use crate::error::Result;
use crate::runs::takeover::{Processes, Takeover, takeover, vantage};
use crate::runs::{Advance, LEASE_EXPIRED, PARENT_LEASE_EXPIRED};
use crate::sql::{Col, Db, Fields, Sql};

/// The running runs whose lease has expired, oldest first: on SQLite the
/// running runs only (`idx_runs_status_created`), sorted among
/// themselves; on PostgreSQL `idx_runs_running_lease` (V7).
pub(crate) const EXPIRED_LEASES: (&str, &str) = (
    "SELECT id, loop_id FROM loop_runs WHERE status = 'running' AND lease_expires_at <= ?1
     ORDER BY lease_expires_at, rowid",
    "SELECT id, loop_id FROM loop_runs WHERE status = 'running' AND lease_expires_at <= ?1
     ORDER BY lease_expires_at, id",
);

/// Locks loop `?1` unless another transaction holds it (PostgreSQL); on
/// SQLite reads it. Its placement comes along (issue 30, P5).
const LOCK_LOOP: (&str, &str) = (
    "SELECT id, runs_on FROM loops WHERE id = ?1",
    "SELECT id, runs_on FROM loops WHERE id = ?1 FOR NO KEY UPDATE SKIP LOCKED",
);

/// Re-reads a candidate, still running and expired; PostgreSQL skips it
/// when another transaction holds its row.
const EXPIRED_RUN: (&str, &str) = (
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?2"
    ),
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?2
         FOR NO KEY UPDATE SKIP LOCKED"
    ),
);

/// Abandons a run the takeover rule gave up: still running under the
/// claimant it was judged by (`?5`), with a lease that expired at or
/// before the cutoff (`?4`). The pid and claimant are kept for the record.
/// A run with a cancel request (issue 28) is recorded cancelled instead,
/// and is not retried.
const ABANDON: &str = concat!(
    "UPDATE loop_runs SET
       status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE 'abandoned' END,
       finished_at = ?2, lease_expires_at = NULL,
       error = ?3, updated_at = ?2
     WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?4
       AND claimed_by IS NOT DISTINCT FROM ?5
     RETURNING ",
    run_columns!()
);

impl<D: Db> RecoveryOps for D {
    fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>> {
        let candidates = self.read(|c| {
            c.query_vec(
                c.dialect().pick(EXPIRED_LEASES.0, EXPIRED_LEASES.1),
                &[now.into()],
                ("loop_runs", "finding expired run leases"),
                candidate,
            )
        })?;
        let mut recovered = Vec::new();
        for (id, loop_id) in candidates {
            // Each run in its own short write transaction: the guarded
            // abandon, then its linked workflow runs failed and its loop
            // advanced, and the other daemons woken (PostgreSQL).
            let one = self.write(|c| {
                let Some(run) = abandon_expired(self, c, &id, &loop_id, now)? else {
                    return Ok(None);
                };
                // Classified as a finalized run is (issue 27).
                let run = crate::runs::ops::record_facts(c, run, &Default::default())?;
                let failed = crate::workflow_runs::ops::fail_linked_workflow_runs(
                    c,
                    &run.id,
                    PARENT_LEASE_EXPIRED,
                    now,
                )?;
                let advanced = crate::runs::advance_after(c, &run, now)?;
                c.notify(run.loop_id.as_str())?;
                Ok(Some(Recovered::of(run, failed, advanced)))
            })?;
            recovered.extend(one);
        }
        Ok(recovered)
    }
}

/// An [`EXPIRED_LEASES`] row: the run and its loop.
fn candidate(row: &dyn Fields) -> Col<(RunId, LoopId)> {
    const NAMES: &[&str] = &["id", "loop_id"];
    Ok((parsed(row, NAMES, 0)?, parsed(row, NAMES, 1)?))
}

/// Abandons run `id` of loop `loop_id` in the caller's write transaction
/// when it is still running with an expired lease and the takeover rule
/// gives it up (SPEC §9 item 14 where its processes can be seen; lease
/// plus grace for another host's run). The abandoned run, if any.
fn abandon_expired(
    db: &impl Db,
    c: &mut dyn Sql,
    id: &RunId,
    loop_id: &LoopId,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    let d = c.dialect();
    if !may_lock_loop(c, loop_id, &db.labels())? {
        return Ok(None);
    }
    let Some((run, process)) = c.query_opt(
        d.pick(EXPIRED_RUN.0, EXPIRED_RUN.1),
        &[id.as_str().into(), now.into()],
        ("loop_runs", "re-reading an expired run"),
        columns::run_and_process,
    )?
    else {
        return Ok(None);
    };
    let mut alive = Processes {
        c: &mut *c,
        liveness: db.liveness(),
        process,
        run_id: Some(run.id),
    };
    let Takeover::Now { cutoff } = takeover(&run, now, vantage(d, db.host()), &mut alive)? else {
        return Ok(None);
    };
    c.query_opt(
        ABANDON,
        &[
            id.as_str().into(),
            now.into(),
            LEASE_EXPIRED.into(),
            cutoff.into(),
            run.claimed_by.as_deref().into(),
        ],
        ("loop_runs", "abandoning an expired run"),
        columns::run_row,
    )
}

/// Locks loop `loop_id` unless another transaction holds it; true when
/// this transaction may go on: the lock was taken (on SQLite: the loop
/// was read) and the loop runs on this runner's `labels` (issue 30, P5: a
/// placed loop's run is recovered only where it may run again), or the
/// loop does not exist (its runs are still recovered).
fn may_lock_loop(c: &mut dyn Sql, loop_id: &LoopId, labels: &[String]) -> Result<bool> {
    let params = [loop_id.as_str().into()];
    let sql = c.dialect().pick(LOCK_LOOP.0, LOCK_LOOP.1);
    let locked = c.query_opt(sql, &params, ("loops", "locking a loop"), |row| {
        columns::json_opt::<Vec<String>>(row, &["id", "runs_on"], 1)
    })?;
    if let Some(runs_on) = locked {
        let runs_on = runs_on.unwrap_or_default();
        return Ok(loops_core::placement_matches(&runs_on, labels));
    }
    Ok(c.query_int(
        "SELECT COUNT(*) FROM loops WHERE id = ?1",
        &params,
        "reading a loop",
    )? == 0)
}

impl Recovered {
    /// The recovery of `run`, which failed `workflow_runs_failed` and
    /// advanced its loop as `advanced` says.
    pub(crate) fn of(
        run: LoopRun,
        workflow_runs_failed: Vec<WorkflowRunId>,
        (advance, loop_): (Advance, Option<Loop>),
    ) -> Recovered {
        Recovered {
            run,
            workflow_runs_failed,
            loop_,
            advance,
        }
    }
}
