//! `[[workflow]]` tables of a loops file (issue 31): each workflow, inline
//! or from its JSON file, read and validated as `workflows create` reads a
//! file; applied before the loops, which may target them by name.
//!
//! A workflow whose steps, description or parallelism differ from the
//! active one of its name is stored in its place as `workflows create
//! --replace` does: the old one is archived with its runs, and the loops
//! that ran it run the new one.

use std::collections::HashMap;

use anyhow::{Result, anyhow, bail};
use loops_core::{NewWorkflow, Timestamp, WorkflowId, WorkflowSpec};
use loops_store::{Store, StoreError};

use super::file::{Origin, WorkflowEntry};
use crate::request::Warnings;

/// One workflow of the file, validated.
pub(super) struct WantedWorkflow {
    pub(super) name: String,
    pub(super) origin: Origin,
    pub(super) new: NewWorkflow,
}

/// What the apply does with one workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkflowStep {
    Create,
    /// A new version in place of the active one; its loops follow.
    Replace(WorkflowId),
    Unchanged(WorkflowId),
}

/// The workflows of `entries`, each validated; a name twice is an error.
pub(super) fn parse(
    entries: &[WorkflowEntry],
    warnings: &mut Warnings,
) -> Result<Vec<WantedWorkflow>> {
    let mut seen: HashMap<&str, &Origin> = HashMap::new();
    let mut out = Vec::new();
    for e in entries {
        if let Some(first) = seen.insert(&e.name, &e.origin) {
            bail!(
                "{}: workflow {:?} is in the file twice (first at {first})",
                e.origin,
                e.name
            );
        }
        let what = format!("{}: workflow {}", e.origin, e.name);
        let new = crate::commands::workflows::specs::parse_workflow(
            &e.text,
            &what,
            Some(&e.name),
            || Ok(e.dir.clone()),
            warnings,
        )
        .map_err(|err| anyhow!("{what}: {err:#}"))?;
        out.push(WantedWorkflow {
            name: e.name.clone(),
            origin: e.origin.clone(),
            new,
        });
    }
    Ok(out)
}

/// The active workflow named `name`, if any.
pub(super) fn active(store: &Store, name: &str) -> Result<Option<WorkflowSpec>> {
    match store.require_workflow(name) {
        Ok(spec) if spec.name == name => Ok(Some(spec)),
        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The plan for `wanted` against the store's active workflows.
pub(super) fn plan(store: &Store, wanted: &[WantedWorkflow]) -> Result<Vec<WorkflowStep>> {
    wanted
        .iter()
        .map(|w| {
            Ok(match active(store, &w.name)? {
                None => WorkflowStep::Create,
                Some(spec) if same(&spec, &w.new) => WorkflowStep::Unchanged(spec.id),
                Some(spec) => WorkflowStep::Replace(spec.id),
            })
        })
        .collect()
}

/// Whether `spec` is what `new` describes.
fn same(spec: &WorkflowSpec, new: &NewWorkflow) -> bool {
    spec.description == new.description
        && spec.steps == new.steps
        && spec.max_parallel == new.max_parallel
}

/// Writes the workflow steps, inside the apply's transaction.
pub(super) fn carry_out(
    store: &Store,
    wanted: &[WantedWorkflow],
    steps: &[WorkflowStep],
    now: Timestamp,
) -> Result<()> {
    for (w, step) in wanted.iter().zip(steps) {
        if !matches!(step, WorkflowStep::Unchanged(_)) {
            store
                .replace_workflow(&w.new, now)
                .map_err(|e| anyhow!("{}: workflow {}: {e}", w.origin, w.name))?;
        }
    }
    Ok(())
}
