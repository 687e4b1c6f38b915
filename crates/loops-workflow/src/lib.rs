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
//!
//! A workflow run walks its steps in dependency order (SPEC §6.2, §6.3),
//! executes each as a process through `loops_exec`, and records every
//! transition through the store, which writes the SPEC §6.6 events with
//! gap-free sequence numbers in the same transaction as the change.
//!
//! What this runner does beyond the original, on purpose:
//! - **Parallel steps** (SPEC §9 item 35). A workflow's `maxParallel` (1 when
//!   unset) bounds how many independent steps run at once. With 1 the
//!   behaviour and the event order are exactly SPEC §6.3's serial walk. With
//!   more, a step starts as soon as all its dependencies are finished; a
//!   failing step without `continueOnFailure` stops *new* steps from
//!   starting, lets the steps already running finish and record their real
//!   results, and then skips the rest with the failure as the reason.
//! - **Cancel within 100 ms** (SPEC §9 item 21). `workflows cancel` only
//!   writes rows, from another process. While steps run, the runner reads
//!   its run's status every [`WorkflowRunOptions::cancel_poll`] (50 ms by
//!   default; the original polls every 500 ms) and cancels the steps'
//!   [`CancelToken`](loops_exec::CancelToken)s, which tear their process groups down at once.
//! - **Ctrl-C and daemon stop** (SPEC §9 item 19). A
//!   [`WorkflowRunOptions::stop`] token cancels the run itself: it is
//!   recorded `cancelled` with the token's reason and its running steps'
//!   groups are killed. A loop run whose workflow run was cancelled is never
//!   retried (the store's advance checks for it).
//! - **Resume** (SPEC §9 item 38). [`WorkflowRunOptions::resume`] continues a
//!   running run by id, for example after `workflows recover`.
//! - **Bounded summary** (SPEC §9 item 25). The result's stdout summary is
//!   capped; see [`workflow_result`].
//!
//! Threads: the calling thread owns the [`Store`](loops_store::Store)
//! (which is not `Sync`) and does every write; steps execute on scoped
//! worker threads and report back over a channel, as the scheduler's runs
//! do.

mod error;
mod options;
mod plan;
mod preflight;
mod run;
mod summary;
mod worker;

/// The cancel reason a scheduler gives a run whose lease it lost. A
/// workflow run stopped for it is recorded failed rather than cancelled
/// (SPEC §10 item 98): the run did not end by anyone's request.
pub const RUN_LEASE_LOST: &str = "run lease lost";
pub use crate::error::WorkflowError;
pub use crate::options::{DEFAULT_CANCEL_POLL, OnPoolWait, WorkflowRunOptions};
pub use crate::preflight::{preflight_new_workflow, preflight_workflow};
pub use crate::run::{WorkflowOutcome, execute_workflow};
pub use crate::summary::{STEP_OUTPUT_SUMMARY_BYTES, workflow_result};

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
