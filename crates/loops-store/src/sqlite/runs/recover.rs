//! The SQLite side of [`crate::runs::recover`].

use loops_core::{RunId, Timestamp};
use rusqlite::{Connection, params};

use super::advance::advance_after;
use super::{run_and_process, run_returning};
use crate::backend::RecoveryOps;
use crate::error::Result;
use crate::runs::{LEASE_EXPIRED, PARENT_LEASE_EXPIRED, Recovered};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, run_columns, ts};
use crate::sqlite::workflow_runs::fail_linked_workflow_runs;

/// The running runs whose lease has expired, oldest first: the running
/// runs only (`idx_runs_status_created`), sorted among themselves.
pub(in crate::sqlite) const EXPIRED_LEASES: &str = "SELECT id FROM loop_runs
     WHERE status = 'running' AND lease_expires_at <= ?1
     ORDER BY lease_expires_at, rowid";

impl RecoveryOps for Sqlite {
    fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>> {
        let candidates: Vec<RunId> = rows::query_vec(
            &self.conn,
            EXPIRED_LEASES,
            [ts(now)],
            ("loop_runs", "finding expired run leases"),
            |r| rows::parsed(r, "id"),
        )?;
        let mut recovered = Vec::new();
        for id in candidates {
            if let Some(r) = self.write_tx(|conn| self.recover_one(conn, &id, now))? {
                recovered.push(r);
            }
        }
        Ok(recovered)
    }
}

impl Sqlite {
    fn recover_one(
        &self,
        conn: &Connection,
        id: &RunId,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        let Some((_, process)) = rows::query_opt(
            conn,
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM loop_runs
                 WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?2"
            ),
            params![id.as_str(), ts(now)],
            ("loop_runs", "re-reading an expired run"),
            run_and_process,
        )?
        else {
            return Ok(None);
        };
        // SPEC §9 item 14: the probe compares the process start time when
        // the row has one, so a reused pid no longer blocks recovery.
        // `has_live_step_processes` reads on the same connection, inside
        // this transaction.
        if process.is_some_and(|p| self.liveness.is_alive(p)) || self.has_live_step_processes(id)? {
            return Ok(None);
        }
        // The pid and claimant are kept for the record.
        let Some(run) = run_returning(
            conn,
            concat!(
                "UPDATE loop_runs SET status = 'abandoned', finished_at = ?2, lease_expires_at = NULL,
                   error = ?3, updated_at = ?2
                 WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?2
                 RETURNING ",
                run_columns!()
            ),
            params![id.as_str(), ts(now), LEASE_EXPIRED],
            "abandoning an expired run",
        )?
        else {
            return Ok(None);
        };
        let workflow_runs_failed =
            fail_linked_workflow_runs(conn, &run.id, PARENT_LEASE_EXPIRED, now)?;
        let (advance, loop_) = advance_after(conn, &run, now)?;
        Ok(Some(Recovered {
            run,
            workflow_runs_failed,
            loop_,
            advance,
        }))
    }
}
