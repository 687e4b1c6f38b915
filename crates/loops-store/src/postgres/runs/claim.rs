//! The PostgreSQL side of [`crate::runs::claim`].
//!
//! A claim decides exactly as on SQLite, inside one transaction that first
//! locks the requested loops' rows (in id order, so two daemons claiming
//! overlapping sets of loops never deadlock): every claimer of one loop
//! then decides in turn, from the state the previous one committed. A
//! fresh slot is `INSERT … ON CONFLICT DO NOTHING`, so a conflict never
//! aborts the transaction. What PostgreSQL adds:
//! - every claim writes a new `claim_token`, generated before the
//!   transaction, which fences the heartbeats and finalizes of this claim
//!   and recognizes it when the COMMIT's outcome was lost (`outcome.rs`);
//! - `exclusive` is the loop's overlap policy being `skip`, so the partial
//!   unique index `loop_runs_one_running` refuses a second running run of
//!   such a loop even if every check above it were wrong;
//! - a run claimed on another host is re-claimed only after its lease and
//!   a grace (`takeover.rs`).

use std::collections::HashSet;

use loops_core::{Loop, LoopRun, Overlap, RunId, RunStatus, Timestamp};

use super::takeover::Takeover;
use super::{query_slot, run_returning};
use crate::backend::ClaimOps;
use crate::error::{Result, StoreError};
use crate::postgres::loops::{lock_loop, query_loop};
use crate::postgres::rows::{self, ts};
use crate::postgres::{Conn, Postgres};
use crate::random_id_bytes;
use crate::runs::{
    Claim, INTERRUPTED_BY_SHUTDOWN, NotClaimed, may_run_again, new_claim_token, offset_ms,
};
use crate::sqlite::rows::run_columns;

fn not_claimed(why: NotClaimed) -> Result<Claim> {
    Ok(Claim::NotClaimed(why))
}

/// What every write of one claim sets.
struct Claiming<'a> {
    runner_id: &'a str,
    /// This host's name, recorded with the claim: the runner id may name
    /// none (`manual-tick:<pid>`), and takeovers judge by it.
    host: &'a str,
    now: Timestamp,
    lease: Timestamp,
    token: &'a str,
    exclusive: bool,
}

/// A fresh slot: attempt 1, unless the slot has a row (or the loop has a
/// running exclusive run): then nothing.
fn insert_claim(
    c: &mut Conn<'_>,
    lp: &Loop,
    slot: Timestamp,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!(
            "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, claimed_by, lease_expires_at, created_at, updated_at, claim_token,
               exclusive, claimed_host)
             VALUES ($1, $2, $3, $4, 1, 'running', $5, $6, $7, $5, $5, $8, $9, $10)
             ON CONFLICT DO NOTHING
             RETURNING ",
            run_columns!()
        ),
        &[
            &RunId::from_bytes(random_id_bytes()).as_str(),
            &lp.id.as_str(),
            &lp.name,
            &ts(slot),
            &ts(how.now),
            &how.runner_id,
            &ts(how.lease),
            &how.token,
            &how.exclusive,
            &how.host,
        ],
        "claiming a new run",
    )
}

/// A running row whose lease expired at or before `cutoff` and may be
/// taken ([`Takeover::Now`]): taken over with the same attempt (SPEC
/// §1.5), while it is still running under the claimant it was judged by.
fn reclaim_expired(
    c: &mut Conn<'_>,
    run: &LoopRun,
    cutoff: Timestamp,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    // The previous holder's finish, process and results are cleared.
    run_returning(
        c,
        concat!(
            "UPDATE loop_runs SET claimed_by = $2, started_at = $3, lease_expires_at = $4,
               claim_token = $5, exclusive = $6, claimed_host = $9, finished_at = NULL, pid = NULL,
               pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL, duration_ms = NULL,
               stdout = NULL, stderr = NULL, error = NULL, updated_at = $3
             WHERE id = $1 AND status = 'running' AND lease_expires_at <= $7
               AND claimed_by IS NOT DISTINCT FROM $8
             RETURNING ",
            run_columns!()
        ),
        &[
            &run.id.as_str(),
            &how.runner_id,
            &ts(how.now),
            &ts(how.lease),
            &how.token,
            &how.exclusive,
            &ts(cutoff),
            &run.claimed_by,
            &how.host,
        ],
        "re-claiming an expired run",
    )
}

/// A failed, timed-out or abandoned row with attempts left: attempt + 1.
/// A row a shutdown released keeps its attempt number: that attempt was not
/// counted, so it runs again (at least as attempt 1).
fn claim_retry(
    c: &mut Conn<'_>,
    id: &RunId,
    max_attempts: u32,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    // The previous attempt's finish, process and results are cleared.
    run_returning(
        c,
        concat!(
            "UPDATE loop_runs SET
               attempt = CASE WHEN status = 'abandoned' AND error = $6 THEN GREATEST(attempt, 1)
                              ELSE attempt + 1 END,
               status = 'running', claimed_by = $2, started_at = $3, lease_expires_at = $4,
               claim_token = $7, exclusive = $8, claimed_host = $9, finished_at = NULL, pid = NULL,
               pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL, duration_ms = NULL,
               stdout = NULL, stderr = NULL, error = NULL, updated_at = $3
             WHERE id = $1 AND status IN ('failed', 'timed_out', 'abandoned')
               AND (attempt < $5 OR (status = 'abandoned' AND error = $6))
             RETURNING ",
            run_columns!()
        ),
        &[
            &id.as_str(),
            &how.runner_id,
            &ts(how.now),
            &ts(how.lease),
            &i64::from(max_attempts),
            &INTERRUPTED_BY_SHUTDOWN,
            &how.token,
            &how.exclusive,
            &how.host,
        ],
        "claiming a retry",
    )
}

/// A running run of `lp` at a slot other than `slot`, when `lp`'s overlap
/// policy is `skip`: a claim must not start a second run of such a loop
/// beside it. The caller holds the loop's lock, so no other claim of the
/// loop can start one meanwhile.
fn running_elsewhere(c: &mut Conn<'_>, lp: &Loop, slot: Timestamp) -> Result<Option<LoopRun>> {
    if lp.overlap != Overlap::Skip {
        return Ok(None);
    }
    run_returning(
        c,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE loop_id = $1 AND status = 'running' AND scheduled_for <> $2
             LIMIT 1"
        ),
        &[&lp.id.as_str(), &ts(slot)],
        "checking for an overlapping run",
    )
}

/// Locks the loops of `requests`, in id order.
///
/// A scheduled claim (`wait` false) skips the loops another transaction
/// holds (`SKIP LOCKED`): another daemon is deciding them right now, so
/// this one moves on to other loops instead of waiting to find their slots
/// taken, which is what lets several daemons drain many due loops side by
/// side. Returns the ids it locked. A manual claim waits.
fn lock_loops(
    c: &mut Conn<'_>,
    requests: &[(&Loop, Timestamp)],
    wait: bool,
) -> Result<HashSet<String>> {
    let sql = if wait {
        "SELECT id FROM loops WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE"
    } else {
        "SELECT id FROM loops WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED"
    };
    loop_ids(c, sql, requests, "locking the loops to claim")
}

/// The ids `sql` returns for the loop ids of `requests` (its `$1`).
fn loop_ids(
    c: &mut Conn<'_>,
    sql: &str,
    requests: &[(&Loop, Timestamp)],
    context: &'static str,
) -> Result<HashSet<String>> {
    let ids: Vec<&str> = requests.iter().map(|(lp, _)| lp.id.as_str()).collect();
    c.query(sql, &[&ids], context)?
        .iter()
        .map(|row| row.try_get::<_, String>(0).map_err(StoreError::db(context)))
        .collect()
}

/// Who claims, when, and whether the claims are manual (SPEC §3.5: the
/// overlap policy does not apply).
#[derive(Clone, Copy)]
struct ClaimRequest<'a> {
    runner_id: &'a str,
    now: Timestamp,
    manual: bool,
}

/// The ids of `requests`' loops that exist, read without a lock: what a
/// scheduled claim did not lock is either deleted or being claimed.
fn existing_loops(c: &mut Conn<'_>, requests: &[(&Loop, Timestamp)]) -> Result<HashSet<String>> {
    loop_ids(
        c,
        "SELECT id FROM loops WHERE id = ANY($1)",
        requests,
        "reading which loops exist",
    )
}

/// What the claims of `requests` turned out to be, read after their
/// COMMIT's outcome was lost: a slot whose run is running under
/// `runner_id` with the token generated for it was claimed by this call;
/// any other was not ([`NotClaimed::Raced`]).
fn claims_landed(
    c: &mut Conn<'_>,
    requests: &[(&Loop, Timestamp)],
    tokens: &[String],
    runner_id: &str,
) -> Result<Vec<Claim>> {
    let mut claims = Vec::with_capacity(requests.len());
    for ((lp, slot), token) in requests.iter().zip(tokens) {
        let claim = match query_slot(c, &lp.id, *slot)? {
            Some(run)
                if run.status == RunStatus::Running
                    && run.claimed_by.as_deref() == Some(runner_id)
                    && run.claim_token.as_deref() == Some(token.as_str()) =>
            {
                match query_loop(c, &lp.id)? {
                    Some(loop_) => Claim::Claimed { run, loop_ },
                    None => Claim::NotClaimed(NotClaimed::LoopMissing),
                }
            }
            _ => Claim::NotClaimed(NotClaimed::Raced),
        };
        claims.push(claim);
    }
    Ok(claims)
}

impl ClaimOps for Postgres {
    fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
        manual: bool,
    ) -> Result<Claim> {
        let claims = self.claim_many(&[(lp, slot)], runner_id, now, manual)?;
        Ok(claims
            .into_iter()
            .next()
            .unwrap_or(Claim::NotClaimed(NotClaimed::Raced)))
    }

    fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>> {
        self.claim_many(requests, runner_id, now, false)
    }
}

impl Postgres {
    /// Claims `requests` in one transaction; `manual` claims ignore the
    /// overlap policy and are not `exclusive` (SPEC §3.5).
    fn claim_many(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
        manual: bool,
    ) -> Result<Vec<Claim>> {
        // Generated before the transaction, so that a claim whose COMMIT
        // was lost can still be recognized by them.
        let tokens: Vec<String> = requests.iter().map(|_| new_claim_token()).collect();
        self.resolving(
            || {
                self.write_tx(|c| {
                    let locked = lock_loops(c, requests, manual)?;
                    let exist = if locked.len() < requests.len() {
                        existing_loops(c, requests)?
                    } else {
                        locked.clone()
                    };
                    let how = ClaimRequest {
                        runner_id,
                        now,
                        manual,
                    };
                    requests
                        .iter()
                        .zip(&tokens)
                        .map(|((lp, slot), token)| {
                            if !exist.contains(lp.id.as_str()) {
                                return not_claimed(NotClaimed::LoopMissing);
                            }
                            if !locked.contains(lp.id.as_str()) {
                                // Another daemon is claiming it right now.
                                return not_claimed(NotClaimed::Raced);
                            }
                            self.claim_in(c, lp, *slot, token, &how)
                        })
                        .collect()
                })
            },
            |c| claims_landed(c, requests, &tokens, runner_id).map(Some),
        )
    }
}

impl Postgres {
    /// One claim decision inside the caller's transaction, which holds the
    /// loop's lock.
    fn claim_in(
        &self,
        c: &mut Conn<'_>,
        lp: &Loop,
        slot: Timestamp,
        token: &str,
        req: &ClaimRequest<'_>,
    ) -> Result<Claim> {
        let ClaimRequest {
            runner_id,
            now,
            manual,
        } = *req;
        let Some(fresh) = lock_loop(c, &lp.id)? else {
            return not_claimed(NotClaimed::LoopMissing);
        };
        let how = Claiming {
            runner_id,
            host: &self.host,
            now,
            lease: now.add_ms(offset_ms(fresh.lease_ms)),
            token,
            exclusive: !manual && fresh.overlap == Overlap::Skip,
        };
        let existing = c.query_opt(
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM loop_runs WHERE loop_id = $1 AND scheduled_for = $2"
            ),
            &[&fresh.id.as_str(), &ts(slot)],
            ("loop_runs", "reading a run by slot"),
            rows::run_and_process,
        )?;
        // Checked only where the claim would start a run, so a finished or
        // held slot is still reported as such.
        let overlapping = |c: &mut Conn<'_>| {
            if manual {
                return Ok(None);
            }
            running_elsewhere(c, &fresh, slot)
        };
        let claimed = match existing {
            None => {
                if let Some(other) = overlapping(c)? {
                    return not_claimed(NotClaimed::OverlapRunning(other));
                }
                insert_claim(c, &fresh, slot, &how)?
            }
            Some((run, process)) => match run.status {
                RunStatus::Running => match run.lease_expires_at {
                    Some(expiry) if expiry <= now => match self.takeover(c, &run, process, now)? {
                        Takeover::ProcessAlive => {
                            return not_claimed(NotClaimed::ProcessAlive(run));
                        }
                        Takeover::StepProcessAlive => {
                            return not_claimed(NotClaimed::StepProcessAlive(run));
                        }
                        // Another host's run: its lease is held until the
                        // grace has passed too.
                        Takeover::InGrace => return not_claimed(NotClaimed::LeaseHeld(run)),
                        Takeover::Now { cutoff } => {
                            if let Some(other) = overlapping(c)? {
                                return not_claimed(NotClaimed::OverlapRunning(other));
                            }
                            reclaim_expired(c, &run, cutoff, &how)?
                        }
                    },
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
                    if let Some(other) = overlapping(c)? {
                        return not_claimed(NotClaimed::OverlapRunning(other));
                    }
                    claim_retry(c, &run.id, fresh.max_attempts, &how)?
                }
            },
        };
        Ok(match claimed {
            Some(run) => Claim::Claimed { run, loop_: fresh },
            None => Claim::NotClaimed(NotClaimed::Raced),
        })
    }
}
