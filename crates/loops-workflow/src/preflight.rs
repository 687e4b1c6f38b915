//! Checking that every step of a workflow could start, without starting any
//! (SPEC §6.8 `preflightWorkflow`, §10 item 87).
//!
//! Each step is checked in execution order (SPEC §6.2) with its effective
//! target (the step's account and timeout over the target's), exactly as
//! the runner would run it, through `loops_exec::preflight_target`: its
//! environment is built (which really runs `accounts env` for an account),
//! its working directory and, unless it is a shell command, its executable
//! are checked. The first failure is raised.

use loops_core::{NewWorkflow, Step};
use loops_exec::{ExecOptions, Preflight, RunMetadata, preflight_target};

use crate::WorkflowError;
use crate::worker::effective_target;

/// The workflow id steps see while a workflow that is not stored yet is
/// checked (`workflows validate --preflight`), as in the original.
const PREVIEW_ID: &str = "validation";

/// One [`Preflight`] `{command, accountProfile?, accountTool?}` per step of
/// a stored workflow, in execution order. Fails with
/// [`WorkflowError::Preflight`] naming the first step that could not start.
pub fn preflight_workflow(
    workflow: &loops_core::WorkflowSpec,
    opts: &ExecOptions,
) -> Result<Vec<Preflight>, WorkflowError> {
    preflight_steps(&workflow.steps, workflow.id.as_str(), &workflow.name, opts)
}

/// [`preflight_workflow`] for a workflow that is validated but not stored
/// (`workflows validate --preflight`); steps see the workflow id
/// `validation`.
pub fn preflight_new_workflow(
    workflow: &NewWorkflow,
    opts: &ExecOptions,
) -> Result<Vec<Preflight>, WorkflowError> {
    preflight_steps(&workflow.steps, PREVIEW_ID, &workflow.name, opts)
}

fn preflight_steps(
    steps: &[Step],
    workflow_id: &str,
    workflow_name: &str,
    opts: &ExecOptions,
) -> Result<Vec<Preflight>, WorkflowError> {
    loops_core::workflow_execution_order(steps)
        .into_iter()
        .map(|step| {
            let meta = RunMetadata {
                workflow_id: Some(workflow_id.to_owned()),
                workflow_name: Some(workflow_name.to_owned()),
                workflow_step_id: Some(step.id.clone()),
                ..RunMetadata::default()
            };
            preflight_target(&effective_target(step), &meta, opts).map_err(|error| {
                WorkflowError::Preflight {
                    step_id: step.id.clone(),
                    error,
                }
            })
        })
        .collect()
}
