//! The claim operations, written once over [`Db`] for both backends: each
//! claim re-reads its loop (locking its row on PostgreSQL) and its slot's
//! run, asks [`decide`] what to write, and writes
//! it with a statement whose `WHERE` re-checks what the decision read.
//! The transaction the claims of one call share is the backend's
//! ([`ClaimTx`]).
//!
//! What differs between the dialects is text only: SQLite inserts with
//! `INSERT OR IGNORE`; PostgreSQL with `ON CONFLICT DO NOTHING`, and it
//! writes `exclusive` (the loop's overlap policy is `skip` and the claim
//! is not manual), so that the partial unique index
//! `loop_runs_one_running` refuses a second running run of such a loop
//! even if every check above it were wrong. SQLite has no such column:
//! the claim writes bind it last, and SQLite's statements stop one
//! parameter short.

use loops_core::{
    Loop, LoopRun, Overlap, RunId, RunStatus, Timestamp, missing_labels, placement_matches,
};

use super::decide::{ClaimFacts, Decision, decide};
use super::{Claim, ManualClaim, NotClaimed};
use crate::backend::{ClaimOps, ClaimSteps, ClaimTx};
use crate::columns::{self, loop_columns, run_columns};
use crate::error::Result;
use crate::pools::ops::PoolLock;
use crate::random_id_bytes;
use crate::runs::takeover::{Alive, Processes, vantage};
use crate::runs::{INTERRUPTED_BY_SHUTDOWN, new_claim_token, offset_ms};
use crate::sql::{Db, Dialect, Sql, Value};

/// Reads a loop; on PostgreSQL also locks its row until the transaction
/// ends, so the writers of one loop decide one at a time.
pub(super) const LOOP: (&str, &str) = (
    concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = ?1"),
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE id = ?1 FOR NO KEY UPDATE"
    ),
);

/// The run of one slot.
pub(super) const SLOT: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2"
);

/// A running run of a loop at a slot other than `?2` (on SQLite the
/// running runs only, `idx_runs_status_created`).
const RUNNING_ELSEWHERE: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE loop_id = ?1 AND status = 'running' AND scheduled_for <> ?2
     LIMIT 1"
);

/// The insert of a fresh slot, attempt 1; the dialect parts are the verb,
/// the `exclusive` column and what a conflict does.
macro_rules! insert_claim {
    ($verb:literal, $column:literal, $value:literal, $conflict:literal) => {
        concat!(
            $verb,
            " INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, claimed_by, lease_expires_at, created_at, updated_at, claim_token,
               claimed_host, pool",
            $column,
            ")
             VALUES (?1, ?2, ?3, ?4, 1, 'running', ?5, ?6, ?7, ?5, ?5, ?8, ?9, ?10",
            $value,
            ")",
            $conflict,
            " RETURNING ",
            run_columns!()
        )
    };
}

/// A fresh slot: nothing when the slot has a row (or, on PostgreSQL, the
/// loop has a running exclusive run).
const INSERT: (&str, &str) = (
    insert_claim!("INSERT OR IGNORE", "", "", ""),
    insert_claim!(
        "INSERT",
        ", exclusive",
        ", (?11 <> 0)",
        " ON CONFLICT DO NOTHING"
    ),
);

/// The take-over of a running run whose lease expired: the same attempt,
/// the previous holder's finish, process and results cleared. Applies
/// while the row is still running under the claimant it was judged by,
/// with a lease that expired at or before the cutoff (`?7`).
macro_rules! reclaim {
    ($exclusive:literal) => {
        concat!(
            "UPDATE loop_runs SET claimed_by = ?2, started_at = ?3, lease_expires_at = ?4,
               claim_token = ?5, claimed_host = ?6,",
            $exclusive,
            " finished_at = NULL, pid = NULL,
               pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL, duration_ms = NULL,
               stdout = NULL, stderr = NULL, error = NULL, updated_at = ?3
             WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?7
               AND claimed_by IS NOT DISTINCT FROM ?8
             RETURNING ",
            run_columns!()
        )
    };
}

const RECLAIM: (&str, &str) = (reclaim!(""), reclaim!(" exclusive = (?9 <> 0),"));

/// A failed, timed-out or abandoned row with attempts left: attempt + 1,
/// the previous attempt's finish, process and results cleared. A row a
/// shutdown released (`error` is `?6`) keeps its attempt number: that
/// attempt was not counted, so it runs again (at least as attempt 1).
macro_rules! retry {
    ($exclusive:literal) => {
        concat!(
            "UPDATE loop_runs SET
               attempt = CASE WHEN status = 'abandoned' AND error = ?6
                              THEN CASE WHEN attempt > 1 THEN attempt ELSE 1 END
                              ELSE attempt + 1 END,
               status = 'running', claimed_by = ?2, started_at = ?3, lease_expires_at = ?4,
               claim_token = ?7, claimed_host = ?8, pool = ?9,",
            $exclusive,
            " finished_at = NULL, pid = NULL,
               pid_start_ms = NULL, spawn_id = NULL, exit_code = NULL, duration_ms = NULL,
               stdout = NULL, stderr = NULL, error = NULL, updated_at = ?3
             WHERE id = ?1 AND status IN ('failed', 'timed_out', 'abandoned')
               AND (attempt < ?5 OR (status = 'abandoned' AND error = ?6))
             RETURNING ",
            run_columns!()
        )
    };
}

const RETRY: (&str, &str) = (retry!(""), retry!(" exclusive = (?10 <> 0),"));

impl<D: Db + ClaimTx> ClaimOps for D {
    fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
        manual: Option<ManualClaim>,
    ) -> Result<Claim> {
        let requests = [(lp, slot)];
        let claims = Claims::new(self, &requests, runner_id, now, manual);
        Ok(self
            .claim_tx(&claims)?
            .into_iter()
            .next()
            .unwrap_or(Claim::NotClaimed(NotClaimed::Raced)))
    }

    fn claim_trigger(
        &self,
        lp: &Loop,
        trigger_id: &str,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        super::trigger::claim_trigger(self, lp, trigger_id, runner_id, now)
    }

    fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>> {
        self.claim_tx(&Claims::new(self, requests, runner_id, now, None))
    }
}

/// The claims of one call: who claims, when, whether manually (SPEC §3.5:
/// the overlap policy does not apply), and the claim token of each
/// request, generated before the transaction so that a claim whose COMMIT
/// was lost can still be recognized by it.
struct Claims<'a, D> {
    db: &'a D,
    requests: &'a [(&'a Loop, Timestamp)],
    runner_id: &'a str,
    now: Timestamp,
    manual: Option<ManualClaim>,
    /// The labels of this runner, for the placement guard.
    labels: Vec<String>,
    tokens: Vec<String>,
}

impl<'a, D: Db> Claims<'a, D> {
    fn new(
        db: &'a D,
        requests: &'a [(&'a Loop, Timestamp)],
        runner_id: &'a str,
        now: Timestamp,
        manual: Option<ManualClaim>,
    ) -> Self {
        Claims {
            db,
            requests,
            runner_id,
            now,
            manual,
            labels: db.labels(),
            tokens: requests.iter().map(|_| new_claim_token()).collect(),
        }
    }
}

impl<D: Db> ClaimSteps for Claims<'_, D> {
    fn requests(&self) -> &[(&Loop, Timestamp)] {
        self.requests
    }

    fn manual(&self) -> bool {
        self.manual.is_some()
    }

    fn claim(&self, c: &mut dyn Sql, i: usize) -> Result<Claim> {
        let (lp, slot) = self.requests[i];
        let token = &self.tokens[i];
        let d = c.dialect();
        let Some(fresh) = c.query_opt(
            d.pick(LOOP.0, LOOP.1),
            &[lp.id.as_str().into()],
            ("loops", d.pick("reading a loop", "locking a loop")),
            columns::loop_row,
        )?
        else {
            return Ok(Claim::NotClaimed(NotClaimed::LoopMissing));
        };
        let bend = self.manual.unwrap_or_default();
        if !bend.anywhere
            && let Some(refused) = misplaced(&fresh, &self.labels)
        {
            return Ok(Claim::NotClaimed(refused));
        }
        let existing = c.query_opt(
            SLOT,
            &[fresh.id.as_str().into(), slot.into()],
            ("loop_runs", "reading a run by slot"),
            columns::run_and_process,
        )?;
        let (existing, process) = existing.map_or((None, None), |(r, p)| (Some(r), p));
        let mut facts = SlotFacts {
            processes: Processes {
                c: &mut *c,
                liveness: self.db.liveness(),
                process,
                run_id: existing.as_ref().map(|r| r.id),
            },
            lp: &fresh,
            slot,
            manual: self.manual.is_some(),
        };
        let vantage = vantage(d, self.db.host());
        let decision = decide(&fresh, existing, self.now, vantage, &mut facts)?;
        let how = Claiming {
            runner_id: self.runner_id,
            host: self.db.host(),
            now: self.now,
            lease: self.now.add_ms(offset_ms(fresh.lease_ms)),
            token,
            exclusive: self.manual.is_none() && fresh.overlap == Overlap::Skip,
            pool: fresh.policy.pool.as_deref(),
        };
        let starts = matches!(decision, Decision::Insert | Decision::Retry { .. });
        if starts
            && !bend.ignore_pool
            && let Some(full) = pool_full(c, &fresh)?
        {
            return Ok(Claim::NotClaimed(full));
        }
        let claimed = match decision {
            Decision::Refuse(why) => return Ok(Claim::NotClaimed(why)),
            Decision::Insert => insert(c, &fresh, slot, &how)?,
            Decision::Reclaim { run, cutoff } => reclaim(c, &run, cutoff, &how)?,
            Decision::Retry { run } => retry(c, &run.id, fresh.max_attempts, &how)?,
        };
        Ok(match claimed {
            Some(run) => Claim::Claimed { run, loop_: fresh },
            None => Claim::NotClaimed(NotClaimed::Raced),
        })
    }

    /// A slot whose run is running under this call's runner id with the
    /// token generated for it was claimed by this call; any other was not
    /// ([`NotClaimed::Raced`]).
    fn landed(&self, c: &mut dyn Sql) -> Result<Vec<Claim>> {
        let mut claims = Vec::with_capacity(self.requests.len());
        for ((lp, slot), token) in self.requests.iter().zip(&self.tokens) {
            let run = c.query_opt(
                SLOT,
                &[lp.id.as_str().into(), (*slot).into()],
                ("loop_runs", "reading a run by slot"),
                columns::run_row,
            )?;
            claims.push(landed_claim(c, run, self.runner_id, token)?);
        }
        Ok(claims)
    }
}

/// [`NotClaimed::NotPlacedHere`] with the labels `labels` lack when `lp`
/// is placed on some (issue 30, P4).
pub(super) fn misplaced(lp: &Loop, labels: &[String]) -> Option<NotClaimed> {
    (!placement_matches(&lp.policy.runs_on, labels)).then(|| {
        let missing = missing_labels(&lp.policy.runs_on, labels);
        NotClaimed::NotPlacedHere(missing.into_iter().map(str::to_owned).collect())
    })
}

/// What a claim whose COMMIT's outcome was lost left: `run` (its slot's
/// row, read again) is [`Claim::Claimed`] with its loop when it is running
/// under `runner_id` and the claim's `token`; anything else was not this
/// claim's doing ([`NotClaimed::Raced`]).
pub(super) fn landed_claim(
    c: &mut dyn Sql,
    run: Option<LoopRun>,
    runner_id: &str,
    token: &str,
) -> Result<Claim> {
    Ok(match run {
        Some(run)
            if run.status == RunStatus::Running
                && run.claimed_by.as_deref() == Some(runner_id)
                && run.claim_token.as_deref() == Some(token) =>
        {
            match c.query_opt(
                LOOP.0,
                &[run.loop_id.as_str().into()],
                ("loops", "reading a loop"),
                columns::loop_row,
            )? {
                Some(loop_) => Claim::Claimed { run, loop_ },
                None => Claim::NotClaimed(NotClaimed::LoopMissing),
            }
        }
        _ => Claim::NotClaimed(NotClaimed::Raced),
    })
}

/// What the decision of one claim asks the database and the liveness
/// probe, inside the claim's transaction: the processes of the slot's run,
/// and the overlap.
struct SlotFacts<'a, 'c> {
    processes: Processes<'a, 'c>,
    lp: &'a Loop,
    slot: Timestamp,
    manual: bool,
}

impl Alive for SlotFacts<'_, '_> {
    fn process(&mut self) -> bool {
        self.processes.process()
    }

    fn step_process(&mut self) -> Result<bool> {
        self.processes.step_process()
    }
}

impl ClaimFacts for SlotFacts<'_, '_> {
    /// Checked only for a scheduled claim of a loop whose overlap is
    /// `skip`: a claim must not start a second run of it beside another
    /// (issue 15; PostgreSQL's `loop_runs_one_running` index refuses it as
    /// well). On PostgreSQL the claim holds the loop's lock, so no other
    /// claim of the loop can start one meanwhile.
    fn overlapping(&mut self) -> Result<Option<LoopRun>> {
        if self.manual || self.lp.overlap != Overlap::Skip {
            return Ok(None);
        }
        self.processes.c.query_opt(
            RUNNING_ELSEWHERE,
            &[self.lp.id.as_str().into(), self.slot.into()],
            ("loop_runs", "checking for an overlapping run"),
            columns::run_row,
        )
    }
}

/// What every write of one claim sets.
pub(super) struct Claiming<'a> {
    pub(super) runner_id: &'a str,
    /// This host's name, recorded with the claim (the runner id may name
    /// none, as `manual-tick:<pid>` does): PostgreSQL's takeovers judge by
    /// it.
    pub(super) host: Option<&'a str>,
    pub(super) now: Timestamp,
    pub(super) lease: Timestamp,
    pub(super) token: &'a str,
    /// PostgreSQL's `exclusive` column (see the module docs).
    pub(super) exclusive: bool,
    /// The loop's pool, which the run counts against while it runs.
    pub(super) pool: Option<&'a str>,
}

/// [`NotClaimed::PoolFull`] when `lp` belongs to a pool whose limit its
/// running runs and steps reach (issue 30, Q3): counted inside the claim's
/// transaction, under the pool's lock, which `claim_tx` took on
/// PostgreSQL (SQLite's write lock covers it). A pool removed meanwhile
/// limits nothing.
pub(super) fn pool_full(c: &mut dyn Sql, lp: &Loop) -> Result<Option<NotClaimed>> {
    let Some(pool) = lp.policy.pool.as_deref() else {
        return Ok(None);
    };
    Ok(
        crate::pools::ops::pool_full(c, pool, PoolLock::Held)?.map(|max_running| {
            NotClaimed::PoolFull {
                pool: pool.to_owned(),
                max_running,
            }
        }),
    )
}

/// Runs claim write `sql` returning the run written, if any. `params` end
/// with `exclusive`, which SQLite's statements do not bind.
fn write(
    c: &mut dyn Sql,
    (sqlite, postgres): (&'static str, &'static str),
    params: &[Value<'_>],
    what: &'static str,
) -> Result<Option<LoopRun>> {
    let (sql, params) = match c.dialect() {
        Dialect::Sqlite => (sqlite, params.split_last().map_or(params, |(_, p)| p)),
        Dialect::Postgres => (postgres, params),
    };
    c.query_opt(sql, params, ("loop_runs", what), columns::run_row)
}

pub(super) fn insert(
    c: &mut dyn Sql,
    lp: &Loop,
    slot: Timestamp,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    let id = RunId::from_bytes(random_id_bytes());
    let params = [
        id.as_str().into(),
        lp.id.as_str().into(),
        lp.name.as_str().into(),
        slot.into(),
        how.now.into(),
        how.runner_id.into(),
        how.lease.into(),
        how.token.into(),
        how.host.into(),
        how.pool.into(),
        how.exclusive.into(),
    ];
    write(c, INSERT, &params, "claiming a new run")
}

fn reclaim(
    c: &mut dyn Sql,
    run: &LoopRun,
    cutoff: Timestamp,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    let params = [
        run.id.as_str().into(),
        how.runner_id.into(),
        how.now.into(),
        how.lease.into(),
        how.token.into(),
        how.host.into(),
        cutoff.into(),
        run.claimed_by.as_deref().into(),
        how.exclusive.into(),
    ];
    write(c, RECLAIM, &params, "re-claiming an expired run")
}

fn retry(
    c: &mut dyn Sql,
    id: &RunId,
    max_attempts: u32,
    how: &Claiming<'_>,
) -> Result<Option<LoopRun>> {
    let params = [
        id.as_str().into(),
        how.runner_id.into(),
        how.now.into(),
        how.lease.into(),
        max_attempts.into(),
        INTERRUPTED_BY_SHUTDOWN.into(),
        how.token.into(),
        how.host.into(),
        how.pool.into(),
        how.exclusive.into(),
    ];
    write(c, RETRY, &params, "claiming a retry")
}
