//! Workflow runs: a stored workflow's DAG of command and agent steps,
//! executed against a store (SPEC §6).
//!
//! [`execute_workflow`] plans the steps in dependency order, claims each
//! step run in the store, runs ready steps on a pool of worker threads up to
//! the workflow's `maxParallel`, records every step run and event, polls
//! the run's cancel request, and finishes the workflow run with one summary.
//! [`preflight_workflow`] checks every step could start without starting
//! any. Time comes from a [`Clock`](loops_core::Clock), so tests drive runs
//! with a `ManualClock`.
//!
//! ```
//! use std::sync::Arc;
//! use loops_core::{Clock, ManualClock, WorkflowRunStatus, workflow_from_json};
//! use loops_store::Store;
//! use loops_workflow::{WorkflowRunOptions, execute_workflow};
//!
//! let store = Store::open_in_memory(Arc::new(|_| false))?;
//! let clock = ManualClock::new("2026-01-01T00:00:00Z".parse()?);
//! let file = serde_json::json!({"name": "build", "steps": [
//!     {"id": "fetch", "target": {"type": "command", "command": "printf fetched", "shell": true}},
//!     {"id": "test", "dependsOn": ["fetch"],
//!      "target": {"type": "command", "command": "printf tested", "shell": true}},
//! ]});
//! let workflow = store.create_workflow(&workflow_from_json(&file, None)?, clock.now())?;
//! let outcome = execute_workflow(&store, &workflow, &WorkflowRunOptions::new(&clock))?;
//! assert_eq!(outcome.run.status, WorkflowRunStatus::Succeeded);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! This is the crate another tool would use to run a DAG of commands and
//! agents: it knows nothing of loops' schedules, the tick or the daemon
//! (those are `loops-scheduler`).
//!
//! Architecture invariant: nothing here spawns processes or writes SQL
//! directly; those go through `loops_exec` and `loops_store`.

mod workflow;

/// The cancel reason a scheduler gives a run whose lease it lost. A
/// workflow run stopped for it is recorded failed rather than cancelled
/// (SPEC §10 item 98): the run did not end by anyone's request.
pub const RUN_LEASE_LOST: &str = "run lease lost";
pub use crate::workflow::{
    DEFAULT_CANCEL_POLL, STEP_OUTPUT_SUMMARY_BYTES, WorkflowError, WorkflowOutcome,
    WorkflowRunOptions, execute_workflow, preflight_new_workflow, preflight_workflow,
    workflow_result,
};

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
