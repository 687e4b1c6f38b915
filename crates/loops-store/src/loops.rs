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
    Hooks, Loop, LoopId, LoopPolicy, LoopStatus, NewLoop, RunStatus, Timestamp, Usd,
    initial_next_run, validate_new_loop,
};

use crate::Store;
use crate::error::{Result, StoreError};
use crate::sql::{self, Value};

mod decide;
pub(crate) mod ops;
pub(crate) mod statements;

/// The default `limit` of [`Store::list_loops`] (SPEC §4.3).
pub const DEFAULT_LOOP_LIMIT: u32 = 200;

/// What [`Store::list_loops`] returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopFilter {
    /// Only loops with this status.
    pub status: Option<LoopStatus>,
    /// At most this many loops; [`DEFAULT_LOOP_LIMIT`] when unset.
    pub limit: Option<u32>,
    /// Skip this many loops first (paging); none when unset.
    pub offset: Option<u32>,
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

/// The result of [`Store::edit_loop`].
#[derive(Debug, Clone, PartialEq)]
pub struct LoopEdited {
    /// The loop as it was stored when the edit took its lock.
    pub before: Loop,
    /// The loop as stored after the edit.
    pub after: Loop,
}

/// What an edit writes, as the backends receive it: the loop's new
/// settings (all of them; unchanged ones are the stored values) and whether
/// its next run is recomputed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoopUpdate<'a> {
    /// The loop being edited.
    pub(crate) id: &'a LoopId,
    /// Its status when it was locked; the write is guarded on it.
    pub(crate) status: LoopStatus,
    /// The settings to store.
    pub(crate) settings: &'a NewLoop,
    /// `Some(next)` when the schedule changed on an active or paused loop:
    /// `nextRunAt` becomes `next` and a pending retry of the old schedule
    /// is dropped. `None` leaves both as stored.
    pub(crate) reschedule: Option<Option<Timestamp>>,
    /// When the edit happens (`updatedAt`).
    pub(crate) now: Timestamp,
}

/// The loop [`Store::create_loop`] would store for `new` at `now`, with a
/// fresh id, validated the same way, written nowhere: `create --dry-run`
/// (issue 28). The id is one a create would not reuse.
pub fn loop_to_create(new: &NewLoop, now: Timestamp) -> Result<Loop> {
    validate_new_loop(new)?;
    let next_run_at = first_run(new, now)?;
    let id = LoopId::from_bytes(crate::random_id_bytes());
    Ok(decide::new_loop(new, id, next_run_at, now))
}

/// The first run of a loop with settings `new` created or rescheduled at
/// `now`: none for a loop that runs on triggers only (issue 30, T1).
pub(crate) fn first_run(new: &NewLoop, now: Timestamp) -> Result<Option<Timestamp>> {
    if new.policy.trigger_only {
        return Ok(None);
    }
    Ok(initial_next_run(&new.schedule, now)?)
}

/// The settings of a stored loop, as [`Store::edit_loop`] hands them to
/// its caller to change.
pub fn loop_settings(lp: &Loop) -> NewLoop {
    NewLoop {
        name: lp.name.clone(),
        description: lp.description.clone(),
        schedule: lp.schedule.clone(),
        target: lp.target.clone(),
        catch_up: lp.catch_up,
        catch_up_limit: lp.catch_up_limit,
        overlap: lp.overlap,
        max_attempts: lp.max_attempts,
        retry_delay_ms: lp.retry_delay_ms,
        lease_ms: lp.lease_ms,
        expires_at: lp.expires_at,
        policy: lp.policy.clone(),
        hooks: lp.hooks.clone(),
    }
}

/// A loop's policy (issue 17) as its V8 columns store it: `labels` and
/// `skip_exit_codes` as JSON arrays, NULL when empty; `backoff` NULL for
/// fixed; integers as `i64`.
#[derive(Debug, Clone)]
pub(crate) struct PolicyColumns {
    pub(crate) labels: Option<String>,
    pub(crate) expires_after_runs: Option<i64>,
    pub(crate) pause_after_failures: Option<i64>,
    pub(crate) backoff: Option<&'static str>,
    pub(crate) max_retry_delay_ms: Option<i64>,
    pub(crate) skip_exit_codes: Option<String>,
    pub(crate) max_cost_per_day_nanos: Option<i64>,
    pub(crate) runs_on: Option<String>,
    pub(crate) pool: Option<String>,
    pub(crate) after: Option<String>,
    pub(crate) trigger_only: bool,
    pub(crate) watch: Option<String>,
    pub(crate) scope: Option<String>,
}

impl PolicyColumns {
    /// The policy and `hooks` as the last sixteen parameters of a loop's
    /// insert and edit, in their column order (`labels` … `scope`).
    pub(crate) fn values<'a>(&'a self, hooks: &'a Hooks) -> [Value<'a>; 16] {
        [
            sql::json(self.labels.as_deref()),
            self.expires_after_runs.into(),
            self.pause_after_failures.into(),
            self.backoff.into(),
            self.max_retry_delay_ms.into(),
            sql::json(self.skip_exit_codes.as_deref()),
            hooks.on_failure.as_deref().into(),
            hooks.on_success.as_deref().into(),
            hooks.hook_show_output.into(),
            self.max_cost_per_day_nanos.into(),
            sql::json(self.runs_on.as_deref()),
            self.pool.as_deref().into(),
            sql::json(self.after.as_deref()),
            self.trigger_only.into(),
            sql::json(self.watch.as_deref()),
            self.scope.as_deref().into(),
        ]
    }

    /// Encodes `policy`.
    pub(crate) fn of(policy: &LoopPolicy) -> Result<PolicyColumns> {
        let array = |empty: bool, value: serde_json::Result<String>| -> Result<Option<String>> {
            if empty {
                return Ok(None);
            }
            value
                .map(Some)
                .map_err(|e| StoreError::Encode(format!("loop policy: {e}")))
        };
        Ok(PolicyColumns {
            labels: array(
                policy.labels.is_empty(),
                serde_json::to_string(&policy.labels),
            )?,
            expires_after_runs: policy.expires_after_runs.map(i64::from),
            pause_after_failures: policy.pause_after_failures.map(i64::from),
            backoff: (!policy.backoff.is_fixed()).then(|| policy.backoff.as_str()),
            max_retry_delay_ms: policy
                .max_retry_delay_ms
                .map(|ms| {
                    i64::try_from(ms).map_err(|_| {
                        StoreError::Encode(format!("maxRetryDelayMs: {ms} is too large"))
                    })
                })
                .transpose()?,
            skip_exit_codes: array(
                policy.skip_exit_codes.is_empty(),
                serde_json::to_string(&policy.skip_exit_codes),
            )?,
            max_cost_per_day_nanos: policy.max_cost_per_day.map(Usd::nanos),
            runs_on: array(
                policy.runs_on.is_empty(),
                serde_json::to_string(&policy.runs_on),
            )?,
            pool: policy.pool.clone(),
            after: array(
                policy.after.is_empty(),
                serde_json::to_string(&policy.after),
            )?,
            trigger_only: policy.trigger_only,
            watch: policy
                .watch
                .as_ref()
                .map(|w| {
                    serde_json::to_string(w)
                        .map_err(|e| StoreError::Encode(format!("loop watch: {e}")))
                })
                .transpose()?,
            scope: policy.scope.clone(),
        })
    }
}

/// The streaks a new loop with `policy` shows: 0 for each policy set.
pub(crate) fn new_streaks(policy: &LoopPolicy) -> (Option<u32>, Option<u32>) {
    (
        policy.expires_after_runs.map(|_| 0),
        policy.pause_after_failures.map(|_| 0),
    )
}

/// `labels` as the JSON array a label filter matches against, or `None`
/// for no filter.
pub(crate) fn label_filter(labels: &[String]) -> Option<String> {
    if labels.is_empty() {
        None
    } else {
        serde_json::to_string(labels).ok()
    }
}

/// The one loop of `named` (the loops called `name`, newest first), or
/// why there is not one: `loop not found`, or [`StoreError::AmbiguousName`].
pub(crate) fn only_named(name: &str, named: Vec<Loop>) -> Result<Loop> {
    let mut named = named;
    match named.len() {
        0 => Err(StoreError::NotFound {
            kind: "loop",
            key: name.to_owned(),
        }),
        1 => Ok(named.remove(0)),
        _ => Err(StoreError::AmbiguousName {
            name: name.to_owned(),
            matches: named.into_iter().map(|lp| (lp.id, lp.created_at)).collect(),
        }),
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

impl Store {
    /// Creates a loop (SPEC §2.3, §7.3).
    ///
    /// The input is validated and the first `nextRunAt` computed before
    /// anything is written; on any error no row exists.
    pub fn create_loop(&self, new: &NewLoop, now: Timestamp) -> Result<Loop> {
        self.backend().create_loop(new, now)
    }

    /// The loop with this id, if any.
    pub fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        self.backend().get_loop(id)
    }

    /// Resolves `id_or_name`: first as an id, then as a name (SPEC §4.3
    /// `requireLoop`, §10 item 34).
    ///
    /// Fails with `loop not found: <x>`, and with
    /// [`StoreError::AmbiguousName`] when several loops have that name:
    /// the original silently picks the newest, which acts on a loop the
    /// user may not have meant (issue 16).
    pub fn require_loop(&self, id_or_name: &str) -> Result<Loop> {
        self.backend().require_loop(id_or_name)
    }

    /// Inside a [`Store::transaction`], waits until no other `loops apply`
    /// (issue 31) holds its transaction, so two applies at once run one
    /// after the other and neither plans from rows the other is changing.
    /// PostgreSQL: a transaction advisory lock; SQLite's transaction holds
    /// the write lock already.
    pub fn lock_applies(&self) -> Result<()> {
        self.backend().lock_applies()
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
        let mut each = each;
        self.backend().for_each_loop(filter, &mut each)
    }

    /// [`Store::for_each_loop`] restricted to the loops that carry every
    /// label of `labels` (issue 17); no labels is no restriction. The
    /// labels are matched inside the query.
    pub fn for_each_labeled_loop(
        &self,
        filter: &LoopFilter,
        labels: &[String],
        each: impl FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut each = each;
        match label_filter(labels) {
            Some(json) => self
                .backend()
                .for_each_labeled_loop(filter, &json, &mut each),
            None => self.backend().for_each_loop(filter, &mut each),
        }
    }

    /// Counts loops, optionally by status. The count is kept by triggers
    /// (schema V6), so it costs the same however many loops are stored.
    pub fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        self.backend().count_loops(status)
    }

    /// Counts runs, optionally by status, from the counts kept by triggers
    /// (schema V6): the same cost at ten runs as at ten million.
    pub fn count_runs(&self, status: Option<RunStatus>) -> Result<u64> {
        self.backend().count_runs(status)
    }

    /// Compares the kept counts of [`Store::count_loops`] and
    /// [`Store::count_runs`] with a real count of every row, and rewrites
    /// them when they differ; `true` when they did. It reads every loop
    /// and run, so it belongs to `doctor`, not to a command run often.
    ///
    /// ```
    /// use loops_store::Store;
    /// let store = Store::open_in_memory(std::sync::Arc::new(|_| false)).unwrap();
    /// assert!(!store.recount_statuses().unwrap(), "a new store's counts are right");
    /// ```
    pub fn recount_statuses(&self) -> Result<bool> {
        self.backend().recount_statuses()
    }

    /// True when the loop has a run in state `running` (the overlap check).
    pub fn has_running_run(&self, loop_id: &LoopId) -> Result<bool> {
        self.backend().has_running_run(loop_id)
    }

    /// The active loops whose `next_run_at` is at or before `now`, earliest
    /// first (SPEC §3.1 step 4; served by `idx_loops_status_next`).
    pub fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>> {
        self.backend().due_loops(now, limit)
    }

    /// Pauses an active loop, keeping `nextRunAt` and any pending retry.
    ///
    /// One guarded `UPDATE … WHERE status = 'active'`. A paused loop is
    /// reported [`LoopChange::Already`]; a stopped or expired loop is
    /// [`Refusal::NotActive`] (the original pauses those blindly, which only
    /// made them resumable with no next run, SPEC §9 item 33).
    pub fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        self.backend().pause_loop(id, now)
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
        self.backend().pause_loop_with_reason(id, reason, now)
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
        self.backend().resume_loop(id, now)
    }

    /// Stops a loop: status stopped, `nextRunAt` and `retryScheduledFor`
    /// cleared (SPEC §1.5, §10 item 93). One guarded `UPDATE`.
    pub fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        self.backend().stop_loop(id, now)
    }

    /// Expires every active loop whose `expiresAt` is at or before `now`:
    /// status expired, `nextRunAt` cleared, `retryScheduledFor` kept
    /// (SPEC §2.6). One statement; returns the expired loops.
    pub fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>> {
        self.backend().expire_loops(now)
    }

    /// Changes a loop's settings in place, keeping its id, status, creation
    /// time and history (issue 16: `loops edit`, `loops rename`).
    ///
    /// `edit` receives the loop as stored, read under the write lock
    /// (SQLite's `BEGIN IMMEDIATE`; on PostgreSQL the row is locked `FOR NO
    /// KEY UPDATE` first, like every writer of a loop), and returns its new
    /// settings, which are validated as [`Store::create_loop`] validates.
    /// So a runner advancing the loop at the same moment is either before
    /// the edit, which then sees the advance, or after it: no advance is
    /// lost, and a removed loop is never written again (`loop not found`).
    ///
    /// When the schedule changes on an active or paused loop, `nextRunAt`
    /// is computed from `now` as create computes it, and a pending retry of
    /// the old schedule is dropped; otherwise `nextRunAt` and the retry stay
    /// as stored. A stopped or expired loop stays so (and without a next
    /// run) until it is resumed. Nothing is written when `edit` or the
    /// validation fails.
    pub fn edit_loop<E: From<StoreError>>(
        &self,
        id: &LoopId,
        now: Timestamp,
        edit: impl FnOnce(&Loop) -> std::result::Result<NewLoop, E>,
    ) -> std::result::Result<LoopEdited, E> {
        self.transaction(|| {
            let before = self
                .backend()
                .lock_loop(id)?
                .ok_or_else(|| StoreError::NotFound {
                    kind: "loop",
                    key: id.to_string(),
                })?;
            let settings = edit(&before)?;
            validate_new_loop(&settings).map_err(StoreError::from)?;
            let live = matches!(before.status, LoopStatus::Active | LoopStatus::Paused);
            let reschedule = if live
                && (settings.schedule != before.schedule
                    || settings.policy.trigger_only != before.policy.trigger_only)
            {
                Some(first_run(&settings, now)?)
            } else {
                None
            };
            let after = self.backend().update_loop(&LoopUpdate {
                id,
                status: before.status,
                settings: &settings,
                reschedule,
                now,
            })?;
            Ok(LoopEdited { before, after })
        })
    }

    /// Deletes a loop, keeping or purging its history as `history` says.
    ///
    /// Under [`DeleteHistory::Purge`] the loop row, its runs and the links of
    /// its workflow runs go in one `BEGIN IMMEDIATE` transaction, so no
    /// reader sees a half-deleted loop.
    pub fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome> {
        self.backend().delete_loop(id, history)
    }
}
