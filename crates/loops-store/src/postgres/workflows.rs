//! The PostgreSQL side of `crate::workflows` (not yet ported).

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

use crate::backend::WorkflowOps;
use crate::postgres::Postgres;

impl WorkflowOps for Postgres {
    fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec> {
        Err(StoreError::Migration(
            "create_workflow: not yet on PostgreSQL".into(),
        ))
    }
    fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>> {
        Err(StoreError::Migration(
            "get_workflow: not yet on PostgreSQL".into(),
        ))
    }
    fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec> {
        Err(StoreError::Migration(
            "require_workflow: not yet on PostgreSQL".into(),
        ))
    }
    fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>> {
        Err(StoreError::Migration(
            "list_workflows: not yet on PostgreSQL".into(),
        ))
    }
    fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec> {
        Err(StoreError::Migration(
            "archive_workflow: not yet on PostgreSQL".into(),
        ))
    }
    fn list_events(
        &self,
        run_id: &WorkflowRunId,
        limit: Option<u32>,
    ) -> Result<Vec<WorkflowEvent>> {
        Err(StoreError::Migration(
            "list_events: not yet on PostgreSQL".into(),
        ))
    }
}
