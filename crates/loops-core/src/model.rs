//! The records of SPEC §1: schedules, targets, loops, runs, workflows.
//!
//! Serde here is a contract: it reads and writes exactly the JSON the
//! original writes (camelCase keys, unset optional fields omitted), both in
//! the `*_json` columns and on `--json` surfaces.
//!
//! One submodule per entity: `schedule.rs` (when a loop runs), `target.rs`
//! (what it runs), `loops.rs` (loops and their runs), `workflow.rs`
//! (workflows, their runs and events), `facts.rs` (what a run said and
//! cost, and why it failed), `timers.rs` (a run's wall clock and
//! idle watchdog) and `runtime.rs` (the daemon lease
//! and executor results). The SPEC defaults live here.

mod facts;
mod loops;
mod policy;
mod runtime;
mod schedule;
mod target;
mod timers;
mod workflow;

#[cfg(test)]
mod tests;

pub use self::facts::RunFacts;
pub use self::loops::{Hooks, Loop, LoopRun, NewLoop};
pub use self::policy::{DEFAULT_MAX_RETRY_DELAY_MS, LoopPolicy, MAX_LABEL_LEN};
pub use self::runtime::{DaemonLease, ExecutorResult};
pub use self::schedule::Schedule;
pub use self::target::{
    Account, AgentAllowlist, AgentTarget, CommandTarget, ProcessTarget, Target, WorkflowTarget,
};
pub use self::timers::{
    AGENT_IDLE_TIMEOUT_ENV, BUFFERED_AGENT_IDLE_TIMEOUT_MS, STREAMING_AGENT_IDLE_TIMEOUT_MS,
    Timers, WallClock, agent_timers, default_agent_idle_ms, effective_timers,
};
pub use self::workflow::{
    NewWorkflow, Step, StepRun, WorkflowEvent, WorkflowRun, WorkflowSpec, loop_workflow_key,
};

/// Default wall clock of command targets: 30 minutes. Agents have none
/// (issue 27; `agents-0.5.11.md` §6), where 0.3.1 gave them this too.
pub const DEFAULT_TIMEOUT_MS: u64 = 1_800_000;
/// Default `minIntervalMs` of a dynamic schedule: 60 s.
pub const DEFAULT_DYNAMIC_INTERVAL_MS: u64 = 60_000;
/// Default `catchUpLimit`.
pub const DEFAULT_CATCH_UP_LIMIT: u32 = 50;
/// The largest `catchUpLimit`: a tick plans at most this many missed slots
/// of one loop, so a huge limit after a long downtime cannot make it build
/// an enormous list (the original accepts any positive limit).
pub const MAX_CATCH_UP_LIMIT: u32 = 10_000;
/// Default `maxAttempts`.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 1;
/// Default `retryDelayMs`: 1 minute.
pub const DEFAULT_RETRY_DELAY_MS: u64 = 60_000;
/// Default `leaseMs`: 30 minutes.
pub const DEFAULT_LEASE_MS: u64 = 1_800_000;
