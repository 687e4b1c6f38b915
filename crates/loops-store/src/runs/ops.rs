//! The operations of [`RunOps`] written once over [`Db`]: lookups, lease
//! heartbeats, pid recording, fenced finalizes and overlap skips, with the
//! few things a backend adds ([`RunHost`]).
//!
//! Both backends run the same statements and the same decisions. What
//! PostgreSQL adds, and SQLite's write lock makes moot:
//! - an operation that advances a loop locks the loop's row first
//!   ([`lock_loop_of_run`], [`lock_loop`]), before it touches a run, so
//!   every writer of one loop takes its locks in the same order;
//! - a finalize, a skip-and-advance and a release wake the other daemons
//!   (`Sql::notify`, delivered at commit; nothing on SQLite);
//! - a finalize whose COMMIT was cut off by a lost connection is not
//!   written again blindly: the run is re-read, and the finalize reported
//!   as landed when the row carries its result under the fence's claim
//!   ([`RunHost::resolve_commit`], [`finalize_landed`]).

use loops_core::{
    ExecutorResult, FailureInput, Loop, LoopId, LoopRun, ProcessRef, RunFacts, RunId, RunStatus,
    Timestamp, Usd,
};

use super::advance::{advance_after, lock_loop, read_loop, serialized_by_transaction};
use super::list::{labeled_statement, list_statement};
use crate::backend::RunOps;
use crate::columns::{self, run_columns};
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::runs::{Advance, Fence, Finalized, RunFilter, SkipOutcome, offset_ms};
use crate::sql::{self, Db, Sql, Value};
use crate::triggers::ops::fire_after;

/// What the run operations written once ask of a backend beyond [`Db`].
/// The defaults are SQLite's: a commit is never lost without an answer,
/// and every run is this machine's.
pub(crate) trait RunHost: Db {
    /// Runs `write`, one write transaction. When its COMMIT may have been
    /// lost with the connection (PostgreSQL), asks `landed` on a new
    /// connection whether it was committed after all, and returns what
    /// `landed` found; otherwise, or when `landed` finds nothing, the
    /// original error.
    fn resolve_commit<T>(
        &self,
        write: impl FnOnce() -> Result<T>,
        landed: impl FnOnce(&mut dyn Sql) -> Result<Option<T>>,
    ) -> Result<T> {
        let _ = landed;
        write()
    }

    /// Whether the liveness probe can judge the processes of `run`: on
    /// PostgreSQL only a run claimed on this host; another host's run is
    /// recovered by lease expiry and grace instead.
    fn sees_processes_of(&self, run: &LoopRun) -> bool {
        let _ = run;
        true
    }
}

/// A run and the process it recorded.
pub(crate) type RunProcess = (LoopRun, Option<ProcessRef>);

/// Runs a statement returning at most one run row (`SELECT` or
/// `… RETURNING`).
pub(crate) fn run_returning(
    c: &mut dyn Sql,
    sql: &str,
    params: &[Value<'_>],
    what: &'static str,
) -> Result<Option<LoopRun>> {
    c.query_opt(sql, params, ("loop_runs", what), columns::run_row)
}

/// Reads one run by id.
pub(crate) fn query_run(c: &mut dyn Sql, id: &RunId) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!("SELECT ", run_columns!(), " FROM loop_runs WHERE id = ?1"),
        &[id.as_str().into()],
        "reading a run",
    )
}

/// Reads the run of one slot.
pub(crate) fn query_slot(
    c: &mut dyn Sql,
    loop_id: &LoopId,
    slot: Timestamp,
) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2"
        ),
        &[loop_id.as_str().into(), slot.into()],
        "reading a run by slot",
    )
}

/// Locks the loop of run `id` before the run is written (PostgreSQL; see
/// [`lock_loop`]). Nothing is locked when the run or its loop does not
/// exist.
pub(crate) fn lock_loop_of_run(c: &mut dyn Sql, id: &RunId) -> Result<()> {
    if serialized_by_transaction(c) {
        return Ok(());
    }
    c.query_rows(
        "SELECT id FROM loops
         WHERE id = (SELECT loop_id FROM loop_runs WHERE id = ?1) FOR NO KEY UPDATE",
        &[id.as_str().into()],
        "locking a run's loop",
        &mut |_| Ok(std::ops::ControlFlow::Break(())),
    )
}

/// The finalize `UPDATE`, with the test of whether the loop's
/// `skip_exit_codes` (issue 17) hold the exit code `?5` spliced in: a
/// failure with such a code is recorded skipped. A run with a cancel
/// request (issue 28) is recorded cancelled, however it ended: the user
/// asked for it to stop, and it is then neither retried nor counted. `?10` is the fence's
/// claimant, or NULL for an unfenced finalize, and `?12` its claim token,
/// when it carries one; either way only a running row changes, so a
/// terminal row never does. `pid_start_ms` survives only when the pid is
/// the one recorded at spawn.
macro_rules! finalize_sql {
    ($skip_exit_code:literal) => {
        concat!(
            "UPDATE loop_runs SET
               status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN CAST(?2 AS TEXT) = 'failed' AND CAST(?5 AS BIGINT) IS NOT NULL
                 AND EXISTS (SELECT 1 FROM ",
            $skip_exit_code,
            ") THEN 'skipped' ELSE ?2 END,
               finished_at = ?3, lease_expires_at = NULL,
               pid_start_ms = CASE WHEN pid IS NOT DISTINCT FROM ?4 THEN pid_start_ms ELSE NULL END,
               pid = ?4, exit_code = ?5, duration_ms = ?6, stdout = ?7, stderr = ?8, error = ?9,
               updated_at = ?3
             WHERE id = ?1 AND status = 'running'
               AND (CAST(?10 AS TEXT) IS NULL OR (claimed_by = ?10 AND lease_expires_at > ?11
                    AND (CAST(?12 AS TEXT) IS NULL OR claim_token = ?12)))
             RETURNING ",
            run_columns!()
        )
    };
}

/// [`finalize_sql!`] in each dialect.
const FINALIZE: [&str; 2] = [
    finalize_sql!(
        "loops l, json_each(l.skip_exit_codes) j
         WHERE l.id = loop_runs.loop_id AND l.skip_exit_codes IS NOT NULL AND j.value = ?5"
    ),
    finalize_sql!(
        "loops l WHERE l.id = loop_runs.loop_id AND l.skip_exit_codes IS NOT NULL
           AND l.skip_exit_codes::jsonb @> to_jsonb(?5::bigint)"
    ),
];

/// Applies a finalize; `Some(row)` when it was written.
fn apply_finalize(
    c: &mut dyn Sql,
    run_id: &RunId,
    result: &ExecutorResult,
    fence: Option<&Fence>,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    let sql = c.dialect().pick(FINALIZE[0], FINALIZE[1]);
    let run = run_returning(
        c,
        sql,
        &[
            run_id.as_str().into(),
            RunStatus::from(result.status).as_str().into(),
            result.finished_at.into(),
            result.pid.into(),
            result.exit_code.into(),
            result.duration_ms.into(),
            (&result.stdout).into(),
            (&result.stderr).into(),
            result.error.as_deref().into(),
            fence.map(|f| f.claimed_by.as_str()).into(),
            now.into(),
            fence.and_then(|f| f.claim_token.as_deref()).into(),
        ],
        "finalizing a run",
    )?;
    run.map(|run| record_facts(c, run, &result.facts))
        .transpose()
}

/// The facts a finalize writes beside the result (issue 27).
const WRITE_FACTS: &str = "UPDATE loop_runs SET failure_class = ?2, failure_fingerprint = ?3,
   session_id = ?4, result = ?5, cost_usd_nanos = ?6, usage = ?7, is_error = ?8,
   worktree = ?9, worktree_branch = ?10
 WHERE id = ?1";

/// Writes what the executor learned of the finalized `run` (`facts`), with
/// the class and fingerprint of its stored status and output (agents note
/// §7.1, §7.2): the classifier reads the status the finalize decided (a
/// skip exit code makes it `skipped`). A run with nothing to say, as a
/// command that succeeded, costs no statement.
pub(crate) fn record_facts(c: &mut dyn Sql, mut run: LoopRun, facts: &RunFacts) -> Result<LoopRun> {
    let mut facts = facts.clone();
    facts.classify(&run.loop_id, &FailureInput::from(&run));
    if facts.is_empty() {
        return Ok(run);
    }
    let usage = facts
        .usage
        .map(|u| serde_json::to_string(&u))
        .transpose()
        .map_err(|e| StoreError::Encode(format!("run usage: {e}")))?;
    c.execute(
        WRITE_FACTS,
        &[
            run.id.as_str().into(),
            facts.failure_class.map(|class| class.as_str()).into(),
            facts.failure_fingerprint.as_deref().into(),
            facts.session_id.as_deref().into(),
            facts.result.as_deref().into(),
            facts.cost_usd.map(Usd::nanos).into(),
            sql::json(usage.as_deref()),
            facts.is_error.into(),
            facts.worktree.as_deref().into(),
            facts.worktree_branch.as_deref().into(),
        ],
        "recording what a run said and cost",
    )?;
    run.facts = facts;
    Ok(run)
}

/// Whether `run`, as stored, holds what a finalize with `result` under
/// `fence` writes: no longer running, with the result's status and
/// `finished_at`, still claimed by the fence's runner under the fence's
/// claim token (when it carries one).
pub(crate) fn finalize_is_stored(
    run: &LoopRun,
    result: &ExecutorResult,
    fence: Option<&Fence>,
) -> bool {
    let same_claim = fence.is_none_or(|f| {
        run.claimed_by.as_deref() == Some(f.claimed_by.as_str())
            && (f.claim_token.is_none() || run.claim_token == f.claim_token)
    });
    run.status == RunStatus::from(result.status)
        && run.finished_at == Some(result.finished_at)
        && same_claim
}

/// The run `run_id` when [`finalize_is_stored`] says a finalize landed on
/// it; `None` when it did not.
pub(crate) fn finalize_landed(
    c: &mut dyn Sql,
    run_id: &RunId,
    result: &ExecutorResult,
    fence: Option<&Fence>,
) -> Result<Option<LoopRun>> {
    Ok(query_run(c, run_id)?.filter(|run| finalize_is_stored(run, result, fence)))
}

fn vanished(id: &RunId, op: &'static str) -> StoreError {
    StoreError::Vanished {
        kind: "run",
        op,
        id: id.to_string(),
    }
}

fn slot_vanished(lp: &Loop, slot: Timestamp) -> StoreError {
    StoreError::Vanished {
        kind: "run",
        op: "skip",
        id: format!("{}@{slot}", lp.id),
    }
}

/// The insert of a skipped row, which writes nothing when the slot has a
/// row: `$insert` and `$on_conflict` say how in each dialect.
macro_rules! insert_skipped_sql {
    ($insert:literal, $on_conflict:literal) => {
        concat!(
            $insert,
            " INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, finished_at, error, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 1, 'skipped', NULL, ?5, ?6, ?5, ?5)",
            $on_conflict,
            " RETURNING ",
            run_columns!()
        )
    };
}

/// Inserts a skipped row for `slot` unless the slot has one; `Some(row)`
/// when inserted.
fn insert_skipped(
    c: &mut dyn Sql,
    lp: &Loop,
    slot: Timestamp,
    reason: &str,
    now: Timestamp,
) -> Result<Option<LoopRun>> {
    let sql = c.dialect().pick(
        insert_skipped_sql!("INSERT OR IGNORE", ""),
        insert_skipped_sql!("INSERT", " ON CONFLICT DO NOTHING"),
    );
    run_returning(
        c,
        sql,
        &[
            RunId::from_bytes(random_id_bytes()).as_str().into(),
            lp.id.as_str().into(),
            (&lp.name).into(),
            slot.into(),
            now.into(),
            reason.into(),
        ],
        "recording a skipped run",
    )
}

impl<D: RunHost> RunOps for D {
    fn get_run(&self, id: &RunId) -> Result<Option<LoopRun>> {
        self.read(|c| query_run(c, id))
    }

    fn get_run_by_slot(&self, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
        self.read(|c| query_slot(c, loop_id, slot))
    }

    fn loop_cost_since(&self, loop_id: &LoopId, since: Timestamp) -> Result<Usd> {
        self.read(|c| {
            c.query_int(
                "SELECT CAST(SUM(cost_usd_nanos) AS BIGINT) FROM loop_runs
                 WHERE cost_usd_nanos IS NOT NULL AND finished_at >= ?2 AND loop_id = ?1",
                &[loop_id.as_str().into(), since.into()],
                "summing a loop's cost",
            )
        })
        .map(Usd::from_nanos)
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<LoopRun>> {
        self.read(|c| {
            let (sql, params) = list_statement(c.dialect(), filter);
            c.query_vec(
                sql,
                &params,
                ("loop_runs", "listing runs"),
                columns::run_row,
            )
        })
    }

    fn list_labeled_runs(&self, filter: &RunFilter, labels: &str) -> Result<Vec<LoopRun>> {
        self.read(|c| {
            let (sql, params) = labeled_statement(c.dialect(), filter, labels);
            c.query_vec(
                sql,
                &params,
                ("loop_runs", "listing runs"),
                columns::run_row,
            )
        })
    }

    fn heartbeat_run_lease(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
        last_output_at: Option<Timestamp>,
    ) -> Result<Option<LoopRun>> {
        self.read(|c| {
            run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET lease_expires_at = ?3, updated_at = ?4,
                       last_output_at = COALESCE(?6, last_output_at)
                     WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                       AND lease_expires_at > ?4
                       AND (CAST(?5 AS TEXT) IS NULL OR claim_token = ?5)
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    run_id.as_str().into(),
                    (&fence.claimed_by).into(),
                    now.add_ms(offset_ms(lease_ms)).into(),
                    now.into(),
                    fence.claim_token.as_deref().into(),
                    last_output_at.into(),
                ],
                "renewing a run lease",
            )
        })
    }

    fn mark_run_spawn(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        spawn_id: Option<&str>,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        self.read(|c| {
            run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET pid = ?2, pid_start_ms = ?3,
                       spawn_id = COALESCE(?6, spawn_id), updated_at = ?5
                     WHERE id = ?1 AND status = 'running'
                       AND (CAST(?4 AS TEXT) IS NULL OR claimed_by = ?4)
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    run_id.as_str().into(),
                    process.pid.into(),
                    process.start.into(),
                    claimed_by.into(),
                    now.into(),
                    spawn_id.into(),
                ],
                "recording a run's pid",
            )
        })
    }

    fn finalize_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: Option<&Fence>,
        now: Timestamp,
    ) -> Result<LoopRun> {
        let written = self.resolve_commit(
            || {
                self.write(|c| {
                    let run = apply_finalize(c, run_id, result, fence, now)?;
                    if let Some(run) = &run {
                        // An ad-hoc run is never retried: its outcome is
                        // final.
                        fire_after(c, run, true, now)?;
                        c.notify(run.loop_id.as_str())?;
                    }
                    Ok(run)
                })
            },
            |c| Ok(finalize_landed(c, run_id, result, fence)?.map(Some)),
        )?;
        if let Some(run) = written {
            return Ok(run);
        }
        self.get_run(run_id)?
            .ok_or_else(|| vanished(run_id, "finalize"))
    }

    fn finalize_and_advance(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: &Fence,
        now: Timestamp,
    ) -> Result<Finalized> {
        self.resolve_commit(
            || {
                self.write(|c| {
                    lock_loop_of_run(c, run_id)?;
                    match apply_finalize(c, run_id, result, Some(fence), now)? {
                        Some(run) => {
                            // `Advance::Triggered` for a triggered run:
                            // its loop's schedule stays (issue 30, T5).
                            let (advance, loop_) = advance_after(c, &run, now)?;
                            let retry_pending = matches!(
                                &advance,
                                Advance::Advanced(plan) if plan.retry_scheduled_for.is_some()
                            );
                            fire_after(c, &run, !retry_pending, now)?;
                            c.notify(run.loop_id.as_str())?;
                            Ok(Finalized {
                                run,
                                loop_,
                                applied: true,
                                advance,
                            })
                        }
                        None => {
                            let run = query_run(c, run_id)?
                                .ok_or_else(|| vanished(run_id, "finalize"))?;
                            let loop_ = read_loop(c, &run.loop_id)?;
                            Ok(Finalized {
                                run,
                                loop_,
                                applied: false,
                                advance: Advance::FencedOut,
                            })
                        }
                    }
                })
            },
            |c| {
                let Some(run) = finalize_landed(c, run_id, result, Some(fence))? else {
                    return Ok(None);
                };
                // The advance committed with the finalize, but what it
                // decided was lost with the connection: the loop is
                // reported as it is stored now.
                let loop_ = read_loop(c, &run.loop_id)?;
                Ok(Some(Finalized {
                    run,
                    loop_,
                    applied: true,
                    advance: Advance::Unconfirmed,
                }))
            },
        )
    }

    fn create_skipped_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<LoopRun> {
        if let Some(run) = self.read(|c| insert_skipped(c, lp, slot, reason, now))? {
            return Ok(run);
        }
        self.get_run_by_slot(&lp.id, slot)?
            .ok_or_else(|| slot_vanished(lp, slot))
    }

    fn create_skipped_run_and_advance(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<SkipOutcome> {
        // A slot with a row is left as it is, and most often the row is
        // another daemon's claim of that very slot: say so without taking
        // the loop's lock, which that daemon may hold in a transaction that
        // waits on this one's locks (a deadlock on PostgreSQL).
        if let Some(run) = self.read(|c| query_slot(c, &lp.id, slot))? {
            return Ok(SkipOutcome::Occupied(run));
        }
        self.write(|c| {
            if !serialized_by_transaction(c) {
                lock_loop(c, &lp.id)?;
            }
            match insert_skipped(c, lp, slot, reason, now)? {
                Some(run) => {
                    let (advance, loop_) = advance_after(c, &run, now)?;
                    c.notify(lp.id.as_str())?;
                    Ok(SkipOutcome::Skipped {
                        run,
                        loop_,
                        advance,
                    })
                }
                None => query_slot(c, &lp.id, slot)?
                    .map(SkipOutcome::Occupied)
                    .ok_or_else(|| slot_vanished(lp, slot)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use loops_core::{ExecutorStatus, RunStatus};

    use super::*;
    use crate::runs::advance::tests::{a_run, at};

    fn result(status: ExecutorStatus, finished: &str) -> ExecutorResult {
        ExecutorResult {
            status,
            exit_code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
            error: None,
            pid: None,
            started_at: at("2026-01-01T00:01:00Z"),
            finished_at: at(finished),
            duration_ms: 30_000,
            facts: Default::default(),
        }
    }

    #[test]
    fn a_finalize_is_stored_when_the_row_holds_its_result_under_its_claim() {
        let mut run = a_run(1, RunStatus::Succeeded);
        run.claim_token = Some("t1".into());
        let done = result(ExecutorStatus::Succeeded, "2026-01-01T00:01:30Z");
        let fence = Fence::new("host:1:a");
        assert!(finalize_is_stored(&run, &done, Some(&fence)));
        assert!(finalize_is_stored(&run, &done, None));
        let token = Fence {
            claimed_by: "host:1:a".into(),
            claim_token: Some("t1".into()),
        };
        assert!(finalize_is_stored(&run, &done, Some(&token)));
        // Another claim of the same runner, another runner, another result.
        let other_token = Fence {
            claim_token: Some("t2".into()),
            ..token
        };
        assert!(!finalize_is_stored(&run, &done, Some(&other_token)));
        assert!(!finalize_is_stored(
            &run,
            &done,
            Some(&Fence::new("host:2:b"))
        ));
        let failed = result(ExecutorStatus::Failed, "2026-01-01T00:01:30Z");
        assert!(!finalize_is_stored(&run, &failed, None));
        let later = result(ExecutorStatus::Succeeded, "2026-01-01T00:01:31Z");
        assert!(!finalize_is_stored(&run, &later, None));
        run.status = RunStatus::Running;
        assert!(!finalize_is_stored(&run, &done, None));
    }
}
