//! The PostgreSQL side of `crate::workflow_runs` (not yet ported).

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

use crate::backend::WorkflowRunOps;
use crate::postgres::Postgres;

impl WorkflowRunOps for Postgres {
    fn create_workflow_run(
        &self,
        input: &NewWorkflowRun<'_>,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        Err(StoreError::Migration(
            "create_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
    fn get_workflow_run(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
        Err(StoreError::Migration(
            "get_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
    fn require_workflow_run(&self, id: &WorkflowRunId) -> Result<WorkflowRun> {
        Err(StoreError::Migration(
            "require_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
    fn list_workflow_runs(&self, filter: &WorkflowRunFilter) -> Result<Vec<WorkflowRun>> {
        Err(StoreError::Migration(
            "list_workflow_runs: not yet on PostgreSQL".into(),
        ))
    }
    fn workflow_run_status(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRunStatus>> {
        Err(StoreError::Migration(
            "workflow_run_status: not yet on PostgreSQL".into(),
        ))
    }
    fn finalize_workflow_run(
        &self,
        id: &WorkflowRunId,
        status: WorkflowRunStatus,
        patch: &WorkflowRunPatch,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        Err(StoreError::Migration(
            "finalize_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
    fn cancel_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        Err(StoreError::Migration(
            "cancel_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
    fn fail_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        Err(StoreError::Migration(
            "fail_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
    fn recover_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<RecoveredWorkflowRun> {
        Err(StoreError::Migration(
            "recover_workflow_run: not yet on PostgreSQL".into(),
        ))
    }
}
