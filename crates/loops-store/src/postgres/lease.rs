//! The PostgreSQL side of `crate::lease` (not yet ported).

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

use crate::backend::LeaseOps;
use crate::postgres::Postgres;

impl LeaseOps for Postgres {
    fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire> {
        Err(StoreError::Migration(
            "acquire_daemon_lease: not yet on PostgreSQL".into(),
        ))
    }
    fn acquire_daemon_lease_with(
        &self,
        req: &LeaseRequest,
        now: Timestamp,
        holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
    ) -> Result<LeaseAcquire> {
        Err(StoreError::Migration(
            "acquire_daemon_lease_with: not yet on PostgreSQL".into(),
        ))
    }
    fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat> {
        Err(StoreError::Migration(
            "heartbeat_daemon_lease: not yet on PostgreSQL".into(),
        ))
    }
    fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease> {
        Err(StoreError::Migration(
            "release_daemon_lease: not yet on PostgreSQL".into(),
        ))
    }
    fn get_daemon_lease(&self) -> Result<Option<DaemonLease>> {
        Err(StoreError::Migration(
            "get_daemon_lease: not yet on PostgreSQL".into(),
        ))
    }
}
