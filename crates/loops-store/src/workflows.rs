//! Workflow specs and the workflow event log (SPEC §4.3 "Workflow specs" and
//! "Events", §6.6), plus the query helpers the workflow-run and step modules
//! share.
//!
//! Invariants:
//! - Event sequence numbers are assigned inside the transaction that writes
//!   the event, and every event is written in the same transaction as the
//!   state change it records. Concurrent writers therefore never collide on
//!   `UNIQUE(workflow_run_id, sequence)`, sequences start at 1 and have no
//!   gaps, and no event describes a change that did not happen (SPEC §9
//!   item 9).
//! - At most one workflow per name is active: the check runs inside the
//!   insert's `BEGIN IMMEDIATE` transaction, and the partial unique index
//!   `idx_workflows_name_active` backs it up. Both surface as
//!   [`StoreError::DuplicateWorkflowName`].

use loops_core::{
    Loop, LoopId, NewWorkflow, Target, Timestamp, WorkflowEvent, WorkflowId, WorkflowRunId,
    WorkflowSpec, WorkflowStatus,
};

use crate::Store;
use crate::error::{Result, StoreError};
use crate::loops::{LoopUpdate, loop_settings};

pub(crate) mod ops;

/// Default `limit` of [`Store::list_workflows`].
pub const DEFAULT_WORKFLOW_LIST_LIMIT: u32 = 200;

/// Default `limit` of [`Store::list_events`].
pub const DEFAULT_EVENT_LIST_LIMIT: u32 = 200;

/// Which workflow specs [`Store::list_workflows`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowFilter {
    /// Only specs with this status. Unfiltered lists sort by status first.
    pub status: Option<WorkflowStatus>,
    /// At most this many; [`DEFAULT_WORKFLOW_LIST_LIMIT`] when unset.
    pub limit: Option<u32>,
}

/// The result of [`Store::replace_workflow`].
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowReplaced {
    /// The new active workflow.
    pub created: WorkflowSpec,
    /// The workflow it replaced, now archived; `None` when no active
    /// workflow had the name, and the new one was simply created.
    pub archived: Option<WorkflowSpec>,
    /// The loops that ran the archived workflow and now run the new one.
    pub repointed: Vec<LoopId>,
}

impl Store {
    /// Stores a validated workflow as active (SPEC §4.3 `createWorkflow`).
    ///
    /// `input` is expected to come from
    /// [`workflow_from_json`](loops_core::workflow_from_json), which validates and
    /// normalizes it. Fails with
    /// [`StoreError::DuplicateWorkflowName`]
    /// when an active workflow already has the name; nothing is written then.
    pub fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec> {
        self.backend().create_workflow(input, now)
    }

    /// The workflow with this id, any status.
    pub fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>> {
        self.backend().get_workflow(id)
    }

    /// Resolves `id_or_name` (SPEC §4.3 `requireWorkflow`): first as an id,
    /// whatever the status, then as the name of the newest **active**
    /// workflow. Archived workflows are found only by id.
    ///
    /// Fails with `workflow not found: <x>`.
    pub fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec> {
        self.backend().require_workflow(id_or_name)
    }

    /// Lists workflows, newest change first (SPEC §4.3 `listWorkflows`).
    /// Without a status filter they are grouped by status first.
    pub fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>> {
        self.backend().list_workflows(filter)
    }

    /// Archives a workflow (SPEC §4.3 `archiveWorkflow`). Unguarded: an
    /// archived workflow stays archived, and loops that reference its id
    /// still run it. Fails with `workflow not found: <id>`.
    pub fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec> {
        self.backend().archive_workflow(id, now)
    }

    /// Stores `input` in place of the active workflow of the same name
    /// (issue 16: `workflows create --replace`), in one transaction: the
    /// old workflow is archived (its runs stay, under its id), the new one
    /// is created active, and every loop whose target is the old
    /// workflow's id is pointed at the new one, so a loop runs the version
    /// its user just stored. Without an active workflow of that name it is
    /// [`Store::create_workflow`]. On any error nothing is written.
    pub fn replace_workflow(
        &self,
        input: &NewWorkflow,
        now: Timestamp,
    ) -> Result<WorkflowReplaced> {
        self.transaction(|| {
            let db = self.backend();
            let Some(old) = db.lock_active_workflow(&input.name)? else {
                return Ok(WorkflowReplaced {
                    created: db.create_workflow(input, now)?,
                    archived: None,
                    repointed: Vec::new(),
                });
            };
            let archived = db.archive_workflow(&old.id, now)?;
            let created = db.create_workflow(input, now)?;
            let mut repointed = Vec::new();
            for lp in db.lock_workflow_loops(&old.id)? {
                let settings = repointed_settings(&lp, &created.id)?;
                db.update_loop(&LoopUpdate {
                    id: &lp.id,
                    status: lp.status,
                    settings: &settings,
                    reschedule: None,
                    now,
                })?;
                repointed.push(lp.id);
            }
            Ok(WorkflowReplaced {
                created,
                archived: Some(archived),
                repointed,
            })
        })
    }

    /// The event log of a workflow run in ascending sequence, at most
    /// `limit` entries ([`DEFAULT_EVENT_LIST_LIMIT`] when unset).
    pub fn list_events(
        &self,
        run_id: &WorkflowRunId,
        limit: Option<u32>,
    ) -> Result<Vec<WorkflowEvent>> {
        self.backend().list_events(run_id, limit)
    }
}

/// A workflow loop's settings, its target pointed at `workflow`.
fn repointed_settings(lp: &Loop, workflow: &WorkflowId) -> Result<loops_core::NewLoop> {
    let mut settings = loop_settings(lp);
    match &mut settings.target {
        Target::Workflow(target) => target.workflow_id = *workflow,
        _ => {
            return Err(StoreError::Corrupt {
                table: "loops",
                id: lp.id.to_string(),
                reason: "selected as a workflow loop but its target is not a workflow".to_owned(),
            });
        }
    }
    Ok(settings)
}
