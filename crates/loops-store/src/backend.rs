//! The backend seam: the operations a storage backend implements, grouped
//! by table.
//!
//! [`Store`] is the one type the other crates name; each of its operations
//! hands over to the [`Backend`] it holds and does nothing else, apart from
//! a few conveniences built from other operations (`list_loops`,
//! `mark_run_pid`, `is_workflow_run_terminal`) and the transaction
//! wrappers [`Store::batch`] and [`Store::transaction`], which drive
//! [`Transactions`]. SQLite (`crate::sqlite`) is the only backend so far.
//!
//! The contract of each operation is the documentation of the `Store`
//! method of the same name: what it returns, when it writes nothing, and
//! which writes are all or nothing. A backend keeps every guard of SPEC
//! §9 items 7–12 with its own means (SQLite: `BEGIN IMMEDIATE` and guarded
//! statements; PostgreSQL: row locks, `ON CONFLICT`, `SKIP LOCKED`).
//! Every instant an operation compares or writes is its `now` argument, so
//! a backend never reads a clock of its own.

use std::ops::ControlFlow;

use loops_core::{
    DaemonLease, ExecutorResult, LeaseId, Loop, LoopId, LoopRun, LoopStatus, NewLoop, NewWorkflow,
    ProcessRef, RunId, RunStatus, StepRun, Timestamp, Usd, WorkflowEvent, WorkflowId, WorkflowRun,
    WorkflowRunId, WorkflowRunStatus, WorkflowSpec,
};

use crate::daemon::{HostRun, NextWake};
use crate::error::Result;
use crate::gc::{GcBatch, GcCounts, GcCursor, GcPolicy, SpaceUsage};
use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
use crate::loops::{DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, LoopUpdate};
use crate::members::DaemonMember;
use crate::runs::{
    CancelOutcome, CancelRequest, Claim, FailureGroup, Fence, Finalized, Recovered, Released,
    RunCost, RunFilter, SkipOutcome,
};
use crate::sql::Sql;
use crate::steps::{StepOutcome, StepStart};
use crate::transfer::{Record, Table};
use crate::workflow_runs::{
    NewWorkflowRun, RecoveredWorkflowRun, WorkflowRunFilter, WorkflowRunPatch,
};
use crate::workflows::WorkflowFilter;

/// Everything a backend implements: one trait per table (or group of
/// operations on one table), and its transactions.
pub(crate) trait Backend:
    Transactions
    + LoopOps
    + RunOps
    + FactOps
    + ClaimOps
    + RecoveryOps
    + CancelOps
    + ReleaseOps
    + LeaseOps
    + MemberOps
    + PoolOps
    + TriggerOps
    + DaemonOps
    + WakeOps
    + WorkflowOps
    + WorkflowRunOps
    + StepOps
    + GcOps
    + TransferOps
{
}

impl<T> Backend for T where
    T: Transactions
        + LoopOps
        + RunOps
        + FactOps
        + ClaimOps
        + RecoveryOps
        + CancelOps
        + ReleaseOps
        + LeaseOps
        + MemberOps
        + PoolOps
        + TriggerOps
        + DaemonOps
        + WakeOps
        + WorkflowOps
        + WorkflowRunOps
        + StepOps
        + GcOps
        + TransferOps
{
}

/// The transaction the operations of a [`Store::batch`] or a
/// [`Store::transaction`] share, which the store opens and ends around
/// the caller's closure.
///
/// Each operation of the table traits is atomic on its own. Outside an
/// outer transaction it commits before it returns; inside one it joins
/// it: within a batch, an operation that fails undoes only its own writes
/// (a savepoint), while within a whole transaction it runs as it is
/// (see [`Store::transaction`] for why that is safe).
pub(crate) trait Transactions {
    /// True while a transaction is open on this connection.
    fn in_transaction(&self) -> bool;
    /// Opens the outer transaction, taking the write lock up front.
    fn begin(&self) -> Result<()>;
    /// Commits the open transaction.
    fn commit(&self) -> Result<()>;
    /// Rolls the open transaction back; it is already failing, so an error
    /// here adds nothing.
    fn rollback(&self);
    /// Marks the open transaction as all or nothing ([`Store::transaction`])
    /// or not: operations inside skip their own savepoints while it is set.
    fn set_whole(&self, whole: bool);
}

/// The `loops` table.
pub(crate) trait LoopOps {
    /// [`Store::lock_applies`](crate::Store::lock_applies).
    fn lock_applies(&self) -> Result<()>;
    /// [`Store::create_loop`](crate::Store::create_loop).
    fn create_loop(&self, new: &NewLoop, now: Timestamp) -> Result<Loop>;
    /// [`Store::get_loop`](crate::Store::get_loop).
    fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>>;
    /// [`Store::require_loop`](crate::Store::require_loop).
    fn require_loop(&self, id_or_name: &str) -> Result<Loop>;
    /// Reads a loop for [`Store::edit_loop`](crate::Store::edit_loop),
    /// inside its transaction, locking the row until it ends (PostgreSQL;
    /// SQLite's transaction already holds the write lock).
    fn lock_loop(&self, id: &LoopId) -> Result<Option<Loop>>;
    /// Writes an edit of [`Store::edit_loop`](crate::Store::edit_loop):
    /// one `UPDATE … WHERE id AND status` returning the row, and on
    /// PostgreSQL a wake-up of the daemons in the same transaction.
    fn update_loop(&self, update: &LoopUpdate<'_>) -> Result<Loop>;
    /// The loops whose target is the workflow `id`, any status, for
    /// [`Store::replace_workflow`](crate::Store::replace_workflow); on
    /// PostgreSQL their rows are locked until the transaction ends.
    fn lock_workflow_loops(&self, id: &WorkflowId) -> Result<Vec<Loop>>;
    /// [`Store::for_each_loop`](crate::Store::for_each_loop).
    fn for_each_loop(
        &self,
        filter: &LoopFilter,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()>;
    /// [`Store::for_each_labeled_loop`](crate::Store::for_each_labeled_loop):
    /// `labels` is the wanted labels as a JSON array.
    fn for_each_labeled_loop(
        &self,
        filter: &LoopFilter,
        labels: &str,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()>;
    /// [`Store::count_loops`](crate::Store::count_loops).
    fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64>;
    /// [`Store::count_runs`](crate::Store::count_runs).
    fn count_runs(&self, status: Option<RunStatus>) -> Result<u64>;
    /// [`Store::recount_statuses`](crate::Store::recount_statuses).
    fn recount_statuses(&self) -> Result<bool>;
    /// [`Store::has_running_run`](crate::Store::has_running_run).
    fn has_running_run(&self, loop_id: &LoopId) -> Result<bool>;
    /// [`Store::due_loops`](crate::Store::due_loops).
    fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>>;
    /// [`Store::pause_loop`](crate::Store::pause_loop).
    fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange>;
    /// [`Store::pause_loop_with_reason`](crate::Store::pause_loop_with_reason).
    fn pause_loop_with_reason(
        &self,
        id: &LoopId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Loop>>;
    /// [`Store::resume_loop`](crate::Store::resume_loop).
    fn resume_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange>;
    /// [`Store::stop_loop`](crate::Store::stop_loop).
    fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange>;
    /// [`Store::expire_loops`](crate::Store::expire_loops).
    fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>>;
    /// [`Store::delete_loop`](crate::Store::delete_loop).
    fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome>;
}

/// The `loop_runs` table: lookups, leases, finalizes and skips.
pub(crate) trait RunOps {
    /// [`Store::get_run`](crate::Store::get_run).
    fn get_run(&self, id: &RunId) -> Result<Option<LoopRun>>;
    /// [`Store::get_run_by_slot`](crate::Store::get_run_by_slot).
    fn get_run_by_slot(&self, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>>;
    /// [`Store::list_runs`](crate::Store::list_runs).
    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<LoopRun>>;
    /// [`Store::loop_cost_since`](crate::Store::loop_cost_since).
    fn loop_cost_since(&self, loop_id: &LoopId, since: Timestamp) -> Result<Usd>;
    /// [`Store::list_labeled_runs`](crate::Store::list_labeled_runs):
    /// `labels` is the wanted labels as a JSON array.
    fn list_labeled_runs(&self, filter: &RunFilter, labels: &str) -> Result<Vec<LoopRun>>;
    /// [`Store::heartbeat_run_lease`](crate::Store::heartbeat_run_lease).
    fn heartbeat_run_lease(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
        last_output_at: Option<Timestamp>,
    ) -> Result<Option<LoopRun>>;
    /// [`Store::mark_run_spawn`](crate::Store::mark_run_spawn).
    fn mark_run_spawn(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        spawn_id: Option<&str>,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>>;
    /// [`Store::finalize_run`](crate::Store::finalize_run).
    fn finalize_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: Option<&Fence>,
        now: Timestamp,
    ) -> Result<LoopRun>;
    /// [`Store::finalize_and_advance`](crate::Store::finalize_and_advance).
    fn finalize_and_advance(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: &Fence,
        now: Timestamp,
    ) -> Result<Finalized>;
    /// [`Store::create_skipped_run`](crate::Store::create_skipped_run).
    fn create_skipped_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<LoopRun>;
    /// [`Store::create_skipped_run_and_advance`](crate::Store::create_skipped_run_and_advance).
    fn create_skipped_run_and_advance(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<SkipOutcome>;
}

/// The `loop_runs` table: reports over what finished runs said and cost
/// (issue 27), written once for both backends (`runs/facts.rs`).
pub(crate) trait FactOps {
    /// [`Store::failure_groups_since`](crate::Store::failure_groups_since).
    fn failure_groups_since(&self, since: Timestamp) -> Result<Vec<FailureGroup>>;
    /// [`Store::for_each_run_cost_since`](crate::Store::for_each_run_cost_since).
    fn for_each_run_cost_since(
        &self,
        since: Timestamp,
        each: &mut dyn FnMut(RunCost) -> ControlFlow<()>,
    ) -> Result<()>;
}

/// The `loop_runs` table: claims.
pub(crate) trait ClaimOps {
    /// [`Store::claim_run`](crate::Store::claim_run) (`manual` `None`) and
    /// [`Store::claim_manual_run`](crate::Store::claim_manual_run)
    /// (`manual` given: the overlap policy does not apply).
    fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
        manual: Option<crate::runs::ManualClaim>,
    ) -> Result<Claim>;
    /// [`Store::claim_trigger`](crate::Store::claim_trigger).
    fn claim_trigger(
        &self,
        lp: &Loop,
        trigger_id: &str,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim>;
    /// [`Store::claim_runs`](crate::Store::claim_runs).
    fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>>;
}

/// The `pools` table (issue 30), written once over
/// [`Db`](crate::sql::Db) in `pools/ops.rs`.
pub(crate) trait PoolOps {
    /// [`Store::set_pool`](crate::Store::set_pool).
    fn set_pool(
        &self,
        name: &str,
        max_running: u32,
        now: Timestamp,
    ) -> Result<crate::pools::PoolInfo>;
    /// [`Store::list_pools`](crate::Store::list_pools).
    fn list_pools(&self) -> Result<Vec<crate::pools::PoolInfo>>;
    /// [`Store::remove_pool`](crate::Store::remove_pool).
    fn remove_pool(&self, name: &str) -> Result<crate::pools::PoolRemoval>;
}

/// The `loop_triggers` table (issue 30), written once over
/// [`Db`](crate::sql::Db) in `triggers/ops.rs`.
pub(crate) trait TriggerOps {
    /// [`Store::add_trigger`](crate::Store::add_trigger).
    fn add_trigger(
        &self,
        loop_id: &LoopId,
        new: &crate::triggers::NewTrigger,
        now: Timestamp,
    ) -> Result<Option<crate::triggers::TriggerAdded>>;
    /// [`Store::pending_triggers`](crate::Store::pending_triggers).
    fn pending_triggers(&self) -> Result<Vec<crate::triggers::LoopTrigger>>;
    /// [`Store::loop_triggers`](crate::Store::loop_triggers).
    fn loop_triggers(
        &self,
        loop_id: &LoopId,
        limit: u32,
    ) -> Result<Vec<crate::triggers::LoopTrigger>>;
    /// [`Store::after_edges`](crate::Store::after_edges).
    fn after_edges(&self) -> Result<Vec<(LoopId, String, Vec<loops_core::AfterEdge>)>>;
    /// [`Store::triggers_of_runs`](crate::Store::triggers_of_runs).
    fn triggers_of_runs(&self, run_ids: &[RunId]) -> Result<Vec<crate::triggers::LoopTrigger>>;
    /// [`Store::watch_loops`](crate::Store::watch_loops).
    fn watch_loops(&self) -> Result<Vec<Loop>>;
    /// [`Store::old_coalesced_triggers`](crate::Store::old_coalesced_triggers).
    fn old_coalesced_triggers(&self, older_than: Timestamp) -> Result<u64>;
    /// [`Store::plan_old_coalesced_triggers`](crate::Store::plan_old_coalesced_triggers).
    fn plan_old_coalesced_triggers(
        &self,
        older_than: Timestamp,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>>;
    /// [`Store::delete_old_coalesced_triggers`](crate::Store::delete_old_coalesced_triggers).
    fn delete_old_coalesced_triggers(&self, ids: &[String], older_than: Timestamp) -> Result<u64>;
    /// [`Store::add_watch_trigger`](crate::Store::add_watch_trigger).
    fn add_watch_trigger(
        &self,
        loop_id: &LoopId,
        changed_at: Timestamp,
        now: Timestamp,
    ) -> Result<crate::triggers::WatchFired>;
}

/// The `loop_runs` table: recovery of expired leases.
pub(crate) trait RecoveryOps {
    /// [`Store::recover_expired_run_leases`](crate::Store::recover_expired_run_leases).
    fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>>;
}

/// The `loop_runs` table: cancel requests (issue 28), written once over
/// [`Db`](crate::sql::Db) in `runs/cancel.rs`.
pub(crate) trait CancelOps {
    /// [`Store::request_cancel`](crate::Store::request_cancel).
    fn request_cancel(
        &self,
        id: &RunId,
        by: &str,
        grace_ms: u64,
        now: Timestamp,
    ) -> Result<Option<CancelOutcome>>;
    /// [`Store::request_cancel_loop`](crate::Store::request_cancel_loop).
    fn request_cancel_loop(
        &self,
        loop_id: &LoopId,
        by: &str,
        grace_ms: u64,
        now: Timestamp,
    ) -> Result<Vec<LoopRun>>;
    /// [`Store::cancel_requests`](crate::Store::cancel_requests).
    fn cancel_requests(&self, claimed_by: &str) -> Result<Vec<CancelRequest>>;
}

/// The part of [`ClaimOps`] that differs per backend: the transaction the
/// claims of one call run in. [`ClaimOps`] itself is written once over
/// [`Db`](crate::sql::Db) for every backend with this part
/// (`runs/claim/ops.rs`). SQLite runs the claims in one `BEGIN IMMEDIATE`;
/// PostgreSQL first locks the requested loops (skipping, for scheduled
/// claims, those another transaction holds) and recognizes claims whose
/// COMMIT's outcome was lost.
pub(crate) trait ClaimTx {
    /// Runs `claims` in one write transaction: one outcome per request, in
    /// request order.
    fn claim_tx(&self, claims: &dyn ClaimSteps) -> Result<Vec<Claim>>;
}

/// The claims of one call, as a backend's [`ClaimTx`] runs them.
pub(crate) trait ClaimSteps {
    /// The slots requested, with their loops as the caller read them.
    fn requests(&self) -> &[(&Loop, Timestamp)];
    /// Whether the claims are manual: they wait for a loop another
    /// transaction holds rather than skip it.
    fn manual(&self) -> bool;
    /// Decides and writes the claim of request `i`, inside the transaction.
    fn claim(&self, c: &mut dyn Sql, i: usize) -> Result<Claim>;
    /// The outcome of each request as stored, read on a new connection
    /// after the COMMIT's outcome was lost.
    fn landed(&self, c: &mut dyn Sql) -> Result<Vec<Claim>>;
}

/// The `loop_runs` table: what a daemon does to its own runs.
pub(crate) trait ReleaseOps {
    /// [`Store::release_run`](crate::Store::release_run).
    fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>>;
    /// [`Store::abandon_orphaned_run`](crate::Store::abandon_orphaned_run).
    fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>>;
    /// [`Store::settle_finished_slot`](crate::Store::settle_finished_slot).
    fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>>;
}

/// The `daemon_lease` table.
pub(crate) trait LeaseOps {
    /// [`Store::acquire_daemon_lease`](crate::Store::acquire_daemon_lease).
    fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire>;
    /// [`Store::acquire_daemon_lease_with`](crate::Store::acquire_daemon_lease_with).
    fn acquire_daemon_lease_with(
        &self,
        req: &LeaseRequest,
        now: Timestamp,
        holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
    ) -> Result<LeaseAcquire>;
    /// [`Store::heartbeat_daemon_lease`](crate::Store::heartbeat_daemon_lease).
    fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat>;
    /// [`Store::release_daemon_lease`](crate::Store::release_daemon_lease).
    fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease>;
    /// [`Store::get_daemon_lease`](crate::Store::get_daemon_lease).
    fn get_daemon_lease(&self) -> Result<Option<DaemonLease>>;
}

/// The daemons registered on the database: the `daemons` table on
/// PostgreSQL, the `daemon_lease` row on SQLite.
pub(crate) trait MemberOps {
    /// [`Store::list_daemons`](crate::Store::list_daemons).
    fn list_daemons(&self, now: Timestamp) -> Result<Vec<DaemonMember>>;
    /// [`Store::record_daemon_skew`](crate::Store::record_daemon_skew).
    fn record_daemon_skew(&self, id: &LeaseId, skew_ms: i64) -> Result<()>;
}

/// The daemon's reads across tables.
pub(crate) trait DaemonOps {
    /// [`Store::running_runs_of_host`](crate::Store::running_runs_of_host).
    fn running_runs_of_host(&self, host: &str, except_runner: &str) -> Result<Vec<HostRun>>;
    /// [`Store::step_processes`](crate::Store::step_processes).
    fn step_processes(&self, run_id: &RunId) -> Result<Vec<ProcessRef>>;
}

/// When the daemon next has work: each backend's own reads (SQLite's
/// plans, PostgreSQL's grace for the runs of other hosts).
pub(crate) trait WakeOps {
    /// [`Store::next_wake`](crate::Store::next_wake).
    fn next_wake(&self, now: Timestamp, runner_id: &str, exclude: &[LoopId]) -> Result<NextWake>;
}

/// The `workflow_step_runs` table.
pub(crate) trait StepOps {
    /// [`Store::list_step_runs`](crate::Store::list_step_runs).
    fn list_step_runs(&self, run_id: &WorkflowRunId) -> Result<Vec<StepRun>>;
    /// [`Store::get_step_run`](crate::Store::get_step_run).
    fn get_step_run(&self, run_id: &WorkflowRunId, step_id: &str) -> Result<Option<StepRun>>;
    /// [`Store::start_pooled_step_run`](crate::Store::start_pooled_step_run).
    fn start_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        pool: Option<&str>,
        now: Timestamp,
    ) -> Result<StepStart>;
    /// [`Store::mark_step_pid`](crate::Store::mark_step_pid).
    fn mark_step_pid(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        process: ProcessRef,
        now: Timestamp,
    ) -> Result<bool>;
    /// [`Store::finalize_step_run`](crate::Store::finalize_step_run).
    fn finalize_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        outcome: &StepOutcome,
        now: Timestamp,
    ) -> Result<StepRun>;
    /// [`Store::skip_step_run`](crate::Store::skip_step_run).
    fn skip_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StepRun>;
    /// [`Store::skip_open_steps`](crate::Store::skip_open_steps).
    fn skip_open_steps(
        &self,
        run_id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<StepRun>>;
}

/// The `workflow_specs` and `workflow_events` tables.
pub(crate) trait WorkflowOps {
    /// [`Store::create_workflow`](crate::Store::create_workflow).
    fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec>;
    /// [`Store::get_workflow`](crate::Store::get_workflow).
    fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>>;
    /// [`Store::require_workflow`](crate::Store::require_workflow).
    fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec>;
    /// [`Store::list_workflows`](crate::Store::list_workflows).
    fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>>;
    /// [`Store::archive_workflow`](crate::Store::archive_workflow).
    fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec>;
    /// The active workflow named `name`, if any, for
    /// [`Store::replace_workflow`](crate::Store::replace_workflow); on
    /// PostgreSQL its row is locked until the transaction ends.
    fn lock_active_workflow(&self, name: &str) -> Result<Option<WorkflowSpec>>;
    /// [`Store::list_events`](crate::Store::list_events).
    fn list_events(&self, run_id: &WorkflowRunId, limit: Option<u32>)
    -> Result<Vec<WorkflowEvent>>;
}

/// The `workflow_runs` table.
pub(crate) trait WorkflowRunOps {
    /// [`Store::create_workflow_run`](crate::Store::create_workflow_run).
    fn create_workflow_run(
        &self,
        input: &NewWorkflowRun<'_>,
        now: Timestamp,
    ) -> Result<WorkflowRun>;
    /// [`Store::get_workflow_run`](crate::Store::get_workflow_run).
    fn get_workflow_run(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRun>>;
    /// [`Store::require_workflow_run`](crate::Store::require_workflow_run).
    fn require_workflow_run(&self, id: &WorkflowRunId) -> Result<WorkflowRun>;
    /// [`Store::list_workflow_runs`](crate::Store::list_workflow_runs).
    fn list_workflow_runs(&self, filter: &WorkflowRunFilter) -> Result<Vec<WorkflowRun>>;
    /// [`Store::workflow_run_status`](crate::Store::workflow_run_status).
    fn workflow_run_status(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRunStatus>>;
    /// [`Store::finalize_workflow_run`](crate::Store::finalize_workflow_run).
    fn finalize_workflow_run(
        &self,
        id: &WorkflowRunId,
        status: WorkflowRunStatus,
        patch: &WorkflowRunPatch,
        now: Timestamp,
    ) -> Result<WorkflowRun>;
    /// [`Store::cancel_workflow_run`](crate::Store::cancel_workflow_run).
    fn cancel_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun>;
    /// [`Store::fail_workflow_run`](crate::Store::fail_workflow_run).
    fn fail_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun>;
    /// [`Store::recover_workflow_run`](crate::Store::recover_workflow_run).
    fn recover_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<RecoveredWorkflowRun>;
}

/// Retention across the run tables: `loop_runs`, `workflow_runs`,
/// `workflow_step_runs` and `workflow_events`.
pub(crate) trait GcOps {
    /// [`Store::plan_gc_batch`](crate::Store::plan_gc_batch).
    fn plan_gc_batch(&self, policy: &GcPolicy, cursor: &mut GcCursor) -> Result<GcBatch>;
    /// [`Store::count_gc_batch`](crate::Store::count_gc_batch).
    fn count_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts>;
    /// [`Store::apply_gc_batch`](crate::Store::apply_gc_batch).
    fn apply_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts>;
    /// [`Store::checkpoint_wal`](crate::Store::checkpoint_wal).
    fn checkpoint_wal(&self) -> Result<()>;
    /// [`Store::wal_backlog`](crate::Store::wal_backlog).
    fn wal_backlog(&self) -> Option<u64>;
    /// [`Store::space_usage`](crate::Store::space_usage).
    fn space_usage(&self) -> Result<SpaceUsage>;
}

/// Moving whole rows between databases (`loops export`, `loops import`):
/// every table a document carries, read and written with ids and every
/// column kept.
pub(crate) trait TransferOps {
    /// Reads every row of `tables`, table by table in that order and by id
    /// within a table, from one consistent snapshot of the database,
    /// handing each to `each`; a `Break` stops reading.
    fn export_rows(
        &self,
        tables: &[Table],
        each: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<()>;
    /// The stored rows of `record`'s table that share its id or one of its
    /// other unique keys (a run's slot, a step's place in its workflow
    /// run, an active workflow's name), and for a loop one other loop of
    /// the same name. Writes nothing.
    fn matching_rows(&self, record: &Record) -> Result<Vec<Record>>;
    /// Writes `record` with its id: inserts it (`over` `None`), writing
    /// nothing when any of its unique keys is taken, or overwrites every
    /// column of the row with its id (`over` that row as
    /// [`TransferOps::matching_rows`] read it). A run, workflow run or step
    /// run is overwritten only while the columns an import decides by
    /// (`over_guard` in `sqlite/transfer.rs`) are still as read, so a
    /// runner's write in between is never undone. True when a row was
    /// written.
    fn write_record(&self, record: &Record, over: Option<&Record>) -> Result<bool>;
}
