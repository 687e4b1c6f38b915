//! Claiming a slot (SPEC §4.3 `claimRun`, §1.5 LoopRun, §10 items 18–24).
//!
//! The whole decision runs in one `BEGIN IMMEDIATE` transaction, so two
//! runners (threads or processes) racing for one slot serialize on the
//! write lock and exactly one of them gets the run. Each write is also
//! guarded in its `WHERE` clause, so the guard holds even without the lock.

use loops_core::{Loop, LoopRun, RunId, RunStatus, Timestamp};
use rusqlite::{Connection, params};

use super::{INTERRUPTED_BY_SHUTDOWN, may_run_again, offset_ms, run_and_process, run_returning};
use crate::error::Result;
use crate::loops::query_loop;
use crate::rows::{self, ts};
use crate::{Store, random_id_bytes};

/// The result of [`Store::claim_run`].
#[derive(Debug, Clone, PartialEq)]
// One outcome per call, matched at once and never stored in bulk, so the
// records are kept inline for easy matching.
#[allow(clippy::large_enum_variant)]
pub enum Claim {
    /// The caller now owns the run: running, claimed by the caller, with a
    /// lease of `now + leaseMs`.
    Claimed {
        /// The claimed run.
        run: LoopRun,
        /// The loop, as re-read inside the claim's transaction.
        loop_: Loop,
    },
    /// Nothing was claimed, and nothing was written.
    NotClaimed(NotClaimed),
}

/// Why a slot was not claimed. Variants that found a row carry it.
#[derive(Debug, Clone, PartialEq)]
pub enum NotClaimed {
    /// The loop no longer exists.
    LoopMissing,
    /// The slot's run is running and its lease has not expired (or it has
    /// no lease at all).
    LeaseHeld(LoopRun),
    /// The run's lease expired, but its recorded process is still alive.
    ProcessAlive(LoopRun),
    /// The run's lease expired, but a step process of a linked workflow run
    /// is still alive.
    StepProcessAlive(LoopRun),
    /// The slot succeeded or was skipped: never claimable again.
    Finished(LoopRun),
    /// The slot failed, timed out or was abandoned on its last attempt.
    AttemptsExhausted(LoopRun),
    /// Another runner changed the row between the read and the guarded
    /// write. Cannot happen between store handles, which serialize on the
    /// write lock, but the guard still reports it.
    Raced,
}

impl Claim {
    /// The claimed run, if the claim succeeded.
    pub fn run(&self) -> Option<&LoopRun> {
        match self {
            Claim::Claimed { run, .. } => Some(run),
            Claim::NotClaimed(_) => None,
        }
    }
}

impl Store {
    /// Claims `slot` of `lp` for `runner_id` (SPEC §4.3 `claimRun`).
    ///
    /// | Existing row | Outcome |
    /// |---|---|
    /// | none | a new row: attempt 1, running |
    /// | running, lease valid or unset | [`NotClaimed::LeaseHeld`] |
    /// | running, lease expired, process or linked step alive | [`NotClaimed::ProcessAlive`] / [`NotClaimed::StepProcessAlive`] |
    /// | running, lease expired, process dead | re-claimed with the **same** attempt |
    /// | succeeded, skipped | [`NotClaimed::Finished`] |
    /// | failed, timed_out, abandoned | attempt + 1 while `attempt < maxAttempts`, else [`NotClaimed::AttemptsExhausted`] |
    ///
    /// The loop is re-read inside the transaction (its `leaseMs` and
    /// `maxAttempts` are the current ones) and returned with the run. The
    /// loop's status is not checked: manual runs claim paused and stopped
    /// loops too (SPEC §3.5).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use loops_core::{CommandTarget, NewLoop, RunStatus, Schedule, Target, Timestamp};
    /// use loops_store::{Claim, NotClaimed, Store};
    ///
    /// let store = Store::open_in_memory(Arc::new(|_| false))?;
    /// let now: Timestamp = "2026-01-01T00:00:00Z".parse()?;
    /// let target = Target::Command(CommandTarget::new("true"));
    /// let lp = store.create_loop(&NewLoop::new("nightly", Schedule::Once { at: now }, target), now)?;
    ///
    /// let Claim::Claimed { run, .. } = store.claim_run(&lp, now, "runner-a", now)? else {
    ///     panic!("a fresh slot is claimable");
    /// };
    /// assert_eq!((run.status, run.attempt), (RunStatus::Running, 1));
    /// // The lease runs `leaseMs` (30 minutes by default) from the claim.
    /// assert_eq!(run.lease_expires_at, Some(now.add_ms(30 * 60 * 1000)));
    ///
    /// // Another runner finds the lease held, and nothing is written.
    /// let later = now.add_ms(1000);
    /// let again = store.claim_run(&lp, now, "runner-b", later)?;
    /// assert!(matches!(again, Claim::NotClaimed(NotClaimed::LeaseHeld(held)) if held.id == run.id));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        self.write_tx(|conn| self.claim_in(conn, lp, slot, runner_id, now))
    }

    /// [`Store::claim_run`] for several slots of different loops, in one
    /// `BEGIN IMMEDIATE` transaction: each request is decided exactly as a
    /// single claim, and the results come back in request order. A runner
    /// that finds many slots due at once claims them all with one commit,
    /// so the last one is not late by the sum of the commits before it.
    pub fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>> {
        self.write_tx(|conn| {
            requests
                .iter()
                .map(|(lp, slot)| self.claim_in(conn, lp, *slot, runner_id, now))
                .collect()
        })
    }

    /// One claim decision inside the caller's write transaction.
    fn claim_in(
        &self,
        conn: &Connection,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        let Some(fresh) = query_loop(conn, &lp.id)? else {
            return Ok(Claim::NotClaimed(NotClaimed::LoopMissing));
        };
        let lease = now.add_ms(offset_ms(fresh.lease_ms));
        let existing = rows::query_opt(
            conn,
            "SELECT * FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2",
            params![fresh.id.as_str(), ts(slot)],
            ("loop_runs", "reading a run by slot"),
            run_and_process,
        )?;
        let claimed = match existing {
            None => insert_claim(conn, &fresh, slot, runner_id, now, lease)?,
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
                        reclaim_expired(conn, &run.id, runner_id, now, lease)?
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
                    claim_retry(conn, &run.id, fresh.max_attempts, runner_id, now, lease)?
                }
            },
        };
        Ok(match claimed {
            Some(run) => Claim::Claimed { run, loop_: fresh },
            None => Claim::NotClaimed(NotClaimed::Raced),
        })
    }
}

fn not_claimed(why: NotClaimed) -> Result<Claim> {
    Ok(Claim::NotClaimed(why))
}

/// A fresh slot: insert-or-ignore attempt 1.
fn insert_claim(
    conn: &Connection,
    lp: &Loop,
    slot: Timestamp,
    runner_id: &str,
    now: Timestamp,
    lease: Timestamp,
) -> Result<Option<LoopRun>> {
    run_returning(
        conn,
        "INSERT OR IGNORE INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
           started_at, claimed_by, lease_expires_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 1, 'running', ?5, ?6, ?7, ?5, ?5)
         RETURNING *",
        params![
            RunId::from_bytes(random_id_bytes()).as_str(),
            lp.id.as_str(),
            lp.name,
            ts(slot),
            ts(now),
            runner_id,
            ts(lease),
        ],
        "claiming a new run",
    )
}

/// A running row whose lease expired and whose process is dead: take it
/// over with the same attempt (SPEC §1.5).
fn reclaim_expired(
    conn: &Connection,
    id: &RunId,
    runner_id: &str,
    now: Timestamp,
    lease: Timestamp,
) -> Result<Option<LoopRun>> {
    // The previous holder's finish, process and results are cleared.
    run_returning(
        conn,
        "UPDATE loop_runs SET claimed_by = ?2, started_at = ?3, lease_expires_at = ?4,
           finished_at = NULL, pid = NULL, pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL,
           duration_ms = NULL, stdout = NULL, stderr = NULL, error = NULL, updated_at = ?3
         WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?3
         RETURNING *",
        params![id.as_str(), runner_id, ts(now), ts(lease)],
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
    runner_id: &str,
    now: Timestamp,
    lease: Timestamp,
) -> Result<Option<LoopRun>> {
    // The previous attempt's finish, process and results are cleared.
    run_returning(
        conn,
        "UPDATE loop_runs SET
           attempt = CASE WHEN status = 'abandoned' AND error IS ?6 THEN MAX(attempt, 1)
                          ELSE attempt + 1 END,
           status = 'running', claimed_by = ?2, started_at = ?3, lease_expires_at = ?4,
           finished_at = NULL, pid = NULL, pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL,
           duration_ms = NULL, stdout = NULL, stderr = NULL, error = NULL, updated_at = ?3
         WHERE id = ?1 AND status IN ('failed', 'timed_out', 'abandoned')
           AND (attempt < ?5 OR (status = 'abandoned' AND error IS ?6))
         RETURNING *",
        params![
            id.as_str(),
            runner_id,
            ts(now),
            ts(lease),
            max_attempts,
            INTERRUPTED_BY_SHUTDOWN
        ],
        "claiming a retry",
    )
}
