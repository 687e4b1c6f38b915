//! The SQLite side of [`crate::runs::claim`].

use loops_core::{Loop, LoopRun, Overlap, RunId, RunStatus, Timestamp};
use rusqlite::{Connection, params};

use super::{run_and_process, run_returning};
use crate::backend::ClaimOps;
use crate::error::Result;
use crate::random_id_bytes;
use crate::runs::{
    Claim, INTERRUPTED_BY_SHUTDOWN, NotClaimed, may_run_again, new_claim_token, offset_ms,
};
use crate::sqlite::Sqlite;
use crate::sqlite::loops::query_loop;
use crate::sqlite::rows::{self, run_columns, ts};

fn not_claimed(why: NotClaimed) -> Result<Claim> {
    Ok(Claim::NotClaimed(why))
}

/// What every write of one claim sets.
struct Claiming<'a> {
    runner_id: &'a str,
    /// This machine's name, when the store was given one.
    host: Option<&'a str>,
    now: Timestamp,
    lease: Timestamp,
}

/// A fresh slot: insert-or-ignore attempt 1.
fn insert_claim(
    conn: &Connection,
    lp: &Loop,
    slot: Timestamp,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    run_returning(
        conn,
        concat!(
            "INSERT OR IGNORE INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, claimed_by, lease_expires_at, created_at, updated_at, claim_token,
               claimed_host)
             VALUES (?1, ?2, ?3, ?4, 1, 'running', ?5, ?6, ?7, ?5, ?5, ?8, ?9)
             RETURNING ",
            run_columns!()
        ),
        params![
            RunId::from_bytes(random_id_bytes()).as_str(),
            lp.id.as_str(),
            lp.name,
            ts(slot),
            ts(how.now),
            how.runner_id,
            ts(how.lease),
            new_claim_token(),
            how.host,
        ],
        "claiming a new run",
    )
}

/// A running row whose lease expired and whose process is dead: take it
/// over with the same attempt (SPEC §1.5).
fn reclaim_expired(conn: &Connection, id: &RunId, how: &Claiming<'_>) -> Result<Option<LoopRun>> {
    // The previous holder's finish, process and results are cleared.
    run_returning(
        conn,
        concat!(
            "UPDATE loop_runs SET claimed_by = ?2, started_at = ?3, lease_expires_at = ?4,
               claim_token = ?5, claimed_host = ?6, finished_at = NULL, pid = NULL,
               pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL, duration_ms = NULL,
               stdout = NULL, stderr = NULL, error = NULL, updated_at = ?3
             WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?3
             RETURNING ",
            run_columns!()
        ),
        params![
            id.as_str(),
            how.runner_id,
            ts(how.now),
            ts(how.lease),
            new_claim_token(),
            how.host,
        ],
        "re-claiming an expired run",
    )
}

/// A failed, timed-out or abandoned row with attempts left: attempt + 1.
/// A row a shutdown released keeps its attempt number: that attempt was not
/// counted, so it runs again (at least as attempt 1).
fn claim_retry(
    conn: &Connection,
    id: &RunId,
    max_attempts: u32,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    // The previous attempt's finish, process and results are cleared.
    run_returning(
        conn,
        concat!(
            "UPDATE loop_runs SET
               attempt = CASE WHEN status = 'abandoned' AND error IS ?6 THEN MAX(attempt, 1)
                              ELSE attempt + 1 END,
               status = 'running', claimed_by = ?2, started_at = ?3, lease_expires_at = ?4,
               claim_token = ?7, claimed_host = ?8, finished_at = NULL, pid = NULL,
               pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL, duration_ms = NULL,
               stdout = NULL, stderr = NULL, error = NULL, updated_at = ?3
             WHERE id = ?1 AND status IN ('failed', 'timed_out', 'abandoned')
               AND (attempt < ?5 OR (status = 'abandoned' AND error IS ?6))
             RETURNING ",
            run_columns!()
        ),
        params![
            id.as_str(),
            how.runner_id,
            ts(how.now),
            ts(how.lease),
            max_attempts,
            INTERRUPTED_BY_SHUTDOWN,
            new_claim_token(),
            how.host,
        ],
        "claiming a retry",
    )
}

/// A running run of `lp` at a slot other than `slot`, when `lp`'s overlap
/// policy is `skip`: a claim must not start a second run of such a loop
/// beside it (issue 15; PostgreSQL's `loop_runs_one_running` index refuses
/// it as well). The running runs only (`idx_runs_status_created`).
fn running_elsewhere(conn: &Connection, lp: &Loop, slot: Timestamp) -> Result<Option<LoopRun>> {
    if lp.overlap != Overlap::Skip {
        return Ok(None);
    }
    run_returning(
        conn,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE loop_id = ?1 AND status = 'running' AND scheduled_for <> ?2
             LIMIT 1"
        ),
        params![lp.id.as_str(), ts(slot)],
        "checking for an overlapping run",
    )
}

impl ClaimOps for Sqlite {
    fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
        manual: bool,
    ) -> Result<Claim> {
        self.write_tx(|conn| self.claim_in(conn, lp, slot, runner_id, now, manual))
    }

    fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>> {
        self.write_tx(|conn| {
            requests
                .iter()
                .map(|(lp, slot)| self.claim_in(conn, lp, *slot, runner_id, now, false))
                .collect()
        })
    }
}

impl Sqlite {
    /// One claim decision inside the caller's write transaction; a
    /// `manual` claim ignores the overlap policy (SPEC §3.5).
    fn claim_in(
        &self,
        conn: &Connection,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
        manual: bool,
    ) -> Result<Claim> {
        let Some(fresh) = query_loop(conn, &lp.id)? else {
            return Ok(Claim::NotClaimed(NotClaimed::LoopMissing));
        };
        let how = Claiming {
            runner_id,
            host: self.host.as_deref(),
            now,
            lease: now.add_ms(offset_ms(fresh.lease_ms)),
        };
        let existing = rows::query_opt(
            conn,
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2"
            ),
            params![fresh.id.as_str(), ts(slot)],
            ("loop_runs", "reading a run by slot"),
            run_and_process,
        )?;
        // Checked only where the claim would start a run, so a finished or
        // held slot is still reported as such.
        let overlapping = || {
            if manual {
                return Ok(None);
            }
            running_elsewhere(conn, &fresh, slot)
        };
        let claimed = match existing {
            None => {
                if let Some(other) = overlapping()? {
                    return not_claimed(NotClaimed::OverlapRunning(other));
                }
                insert_claim(conn, &fresh, slot, &how)?
            }
            Some((run, process)) => match run.status {
                RunStatus::Running => match run.lease_expires_at {
                    Some(expiry) if expiry <= now => {
                        if process.is_some_and(|p| self.liveness.is_alive(p)) {
                            return not_claimed(NotClaimed::ProcessAlive(run));
                        }
                        // Same connection, inside this transaction.
                        if self.has_live_step_processes(&run.id)? {
                            return not_claimed(NotClaimed::StepProcessAlive(run));
                        }
                        if let Some(other) = overlapping()? {
                            return not_claimed(NotClaimed::OverlapRunning(other));
                        }
                        reclaim_expired(conn, &run.id, &how)?
                    }
                    _ => return not_claimed(NotClaimed::LeaseHeld(run)),
                },
                RunStatus::Succeeded | RunStatus::Skipped => {
                    return not_claimed(NotClaimed::Finished(run));
                }
                RunStatus::Failed | RunStatus::TimedOut | RunStatus::Abandoned => {
                    // A run a shutdown interrupted did not count its attempt
                    // (SPEC §9 item 17): it runs again as the same attempt.
                    if !may_run_again(
                        run.status,
                        run.attempt,
                        run.error.as_deref(),
                        fresh.max_attempts,
                    ) {
                        return not_claimed(NotClaimed::AttemptsExhausted(run));
                    }
                    if let Some(other) = overlapping()? {
                        return not_claimed(NotClaimed::OverlapRunning(other));
                    }
                    claim_retry(conn, &run.id, fresh.max_attempts, &how)?
                }
            },
        };
        Ok(match claimed {
            Some(run) => Claim::Claimed { run, loop_: fresh },
            None => Claim::NotClaimed(NotClaimed::Raced),
        })
    }
}
