//! The PostgreSQL side of [`crate::runs::recover`].
//!
//! Each expired run is recovered in its own short transaction, as on
//! SQLite. Daemons sharing the database sweep at once, so each candidate
//! is taken with `FOR NO KEY UPDATE SKIP LOCKED`, its loop first and then the run
//! (the order every writer of a loop locks in): a candidate another
//! daemon is recovering, or a runner is claiming or finalizing right now,
//! is skipped rather than waited on, and the next sweep sees how that
//! ended. The write re-checks the row (still running, lease expired, same
//! claimant), so a run is recovered once, and never after it finished.

use loops_core::{LoopId, RunId, Timestamp};

use super::advance::advance_after;
use super::run_returning;
use super::takeover::Takeover;
use crate::backend::RecoveryOps;
use crate::error::{Result, StoreError};
use crate::postgres::rows::{self, ts};
use crate::postgres::workflow_runs::fail_linked_workflow_runs;
use crate::postgres::{Conn, Postgres};
use crate::runs::{LEASE_EXPIRED, PARENT_LEASE_EXPIRED, Recovered};
use crate::sqlite::rows::run_columns;

/// The running runs whose lease has expired, oldest first
/// (`idx_runs_running_lease`, V7: the running runs only).
const EXPIRED_LEASES: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE status = 'running' AND lease_expires_at <= $1
     ORDER BY lease_expires_at, id"
);

/// Locks loop `id` unless another transaction holds it; true when this
/// transaction may go on: the lock was taken, or the loop does not exist
/// (its runs are still recovered).
fn try_lock_loop(c: &mut Conn<'_>, id: &LoopId) -> Result<bool> {
    let locked = c.query(
        "SELECT id FROM loops WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED",
        &[&id.as_str()],
        "locking a loop",
    )?;
    if !locked.is_empty() {
        return Ok(true);
    }
    let row = c.query_one(
        "SELECT EXISTS (SELECT 1 FROM loops WHERE id = $1)",
        &[&id.as_str()],
        "reading a loop",
    )?;
    let exists: bool = row.try_get(0).map_err(StoreError::db("reading a loop"))?;
    Ok(!exists)
}

impl RecoveryOps for Postgres {
    fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>> {
        let candidates = self.with(|c| {
            c.query_vec(
                EXPIRED_LEASES,
                &[&ts(now)],
                ("loop_runs", "finding expired run leases"),
                rows::run_row,
            )
        })?;
        let mut recovered = Vec::new();
        for run in candidates {
            if let Some(r) = self.write_tx(|c| self.recover_one(c, &run.id, &run.loop_id, now))? {
                recovered.push(r);
            }
        }
        Ok(recovered)
    }
}

impl Postgres {
    fn recover_one(
        &self,
        c: &mut Conn<'_>,
        id: &RunId,
        loop_id: &LoopId,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        if !try_lock_loop(c, loop_id)? {
            return Ok(None);
        }
        let Some((run, process)) = c.query_opt(
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM loop_runs
                 WHERE id = $1 AND status = 'running' AND lease_expires_at <= $2
                 FOR NO KEY UPDATE SKIP LOCKED"
            ),
            &[&id.as_str(), &ts(now)],
            ("loop_runs", "re-reading an expired run"),
            rows::run_and_process,
        )?
        else {
            return Ok(None);
        };
        // SPEC §9 item 14 on this host; lease plus grace for another's.
        let Takeover::Now { cutoff } = self.takeover(c, &run, process, now)? else {
            return Ok(None);
        };
        // The pid and claimant are kept for the record.
        let Some(run) = run_returning(
            c,
            concat!(
                "UPDATE loop_runs SET status = 'abandoned', finished_at = $2,
                   lease_expires_at = NULL, error = $3, updated_at = $2
                 WHERE id = $1 AND status = 'running' AND lease_expires_at <= $4
                   AND claimed_by IS NOT DISTINCT FROM $5
                 RETURNING ",
                run_columns!()
            ),
            &[
                &id.as_str(),
                &ts(now),
                &LEASE_EXPIRED,
                &ts(cutoff),
                &run.claimed_by,
            ],
            "abandoning an expired run",
        )?
        else {
            return Ok(None);
        };
        let workflow_runs_failed =
            fail_linked_workflow_runs(c, &run.id, PARENT_LEASE_EXPIRED, now)?;
        let (advance, loop_) = advance_after(c, &run, now)?;
        c.notify(run.loop_id.as_str())?;
        Ok(Some(Recovered {
            run,
            workflow_runs_failed,
            loop_,
            advance,
        }))
    }
}
