//! The PostgreSQL side of `crate::runs` (not yet ported).

#![allow(unused_variables, unused_imports)]

use std::ops::ControlFlow;

use loops_core::{
    DaemonLease, ExecutorResult, LeaseId, Loop, LoopId, LoopRun, LoopStatus, NewLoop, NewWorkflow,
    ProcessRef, RunId, RunStatus, StepRun, Timestamp, WorkflowEvent, WorkflowId, WorkflowRun,
    WorkflowRunId, WorkflowRunStatus, WorkflowSpec,
};

use crate::daemon::{HostRun, NextWake};
use crate::error::{Result, StoreError};
use crate::gc::{GcBatch, GcCounts, GcCursor, GcPolicy, SpaceUsage};
use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
use crate::loops::{DeleteHistory, DeleteOutcome, LoopChange, LoopFilter};
use crate::runs::{Claim, Fence, Finalized, Recovered, Released, RunFilter, SkipOutcome};
use crate::steps::StepOutcome;
use crate::workflow_runs::{
    NewWorkflowRun, RecoveredWorkflowRun, WorkflowRunFilter, WorkflowRunPatch,
};
use crate::workflows::WorkflowFilter;

use crate::backend::{ClaimOps, RecoveryOps, ReleaseOps, RunOps};
use crate::postgres::Postgres;

impl RunOps for Postgres {
    fn get_run(&self, id: &RunId) -> Result<Option<LoopRun>> {
        Err(StoreError::Migration(
            "get_run: not yet on PostgreSQL".into(),
        ))
    }
    fn get_run_by_slot(&self, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
        Err(StoreError::Migration(
            "get_run_by_slot: not yet on PostgreSQL".into(),
        ))
    }
    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<LoopRun>> {
        Err(StoreError::Migration(
            "list_runs: not yet on PostgreSQL".into(),
        ))
    }
    fn heartbeat_run_lease(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        Err(StoreError::Migration(
            "heartbeat_run_lease: not yet on PostgreSQL".into(),
        ))
    }
    fn mark_run_spawn(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        spawn_id: Option<&str>,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        Err(StoreError::Migration(
            "mark_run_spawn: not yet on PostgreSQL".into(),
        ))
    }
    fn finalize_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: Option<&Fence>,
        now: Timestamp,
    ) -> Result<LoopRun> {
        Err(StoreError::Migration(
            "finalize_run: not yet on PostgreSQL".into(),
        ))
    }
    fn finalize_and_advance(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: &Fence,
        now: Timestamp,
    ) -> Result<Finalized> {
        Err(StoreError::Migration(
            "finalize_and_advance: not yet on PostgreSQL".into(),
        ))
    }
    fn create_skipped_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<LoopRun> {
        Err(StoreError::Migration(
            "create_skipped_run: not yet on PostgreSQL".into(),
        ))
    }
    fn create_skipped_run_and_advance(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<SkipOutcome> {
        Err(StoreError::Migration(
            "create_skipped_run_and_advance: not yet on PostgreSQL".into(),
        ))
    }
}

impl ClaimOps for Postgres {
    fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        Err(StoreError::Migration(
            "claim_run: not yet on PostgreSQL".into(),
        ))
    }
    fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>> {
        Err(StoreError::Migration(
            "claim_runs: not yet on PostgreSQL".into(),
        ))
    }
}

impl RecoveryOps for Postgres {
    fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>> {
        Err(StoreError::Migration(
            "recover_expired_run_leases: not yet on PostgreSQL".into(),
        ))
    }
}

impl ReleaseOps for Postgres {
    fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        Err(StoreError::Migration(
            "release_run: not yet on PostgreSQL".into(),
        ))
    }
    fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        Err(StoreError::Migration(
            "abandon_orphaned_run: not yet on PostgreSQL".into(),
        ))
    }
    fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        Err(StoreError::Migration(
            "settle_finished_slot: not yet on PostgreSQL".into(),
        ))
    }
}
