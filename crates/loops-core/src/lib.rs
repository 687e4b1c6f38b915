//! Domain core of loops: the SPEC §1 types, validation, durations, cron and
//! schedule math.
//!
//! Architecture invariant: this crate does no I/O. It reads no clock (every
//! function that needs "now" takes it as a [`Timestamp`]), draws no
//! randomness (ids are built from bytes the caller supplies), runs no SQL and
//! spawns no processes. The one environmental input is the host's local time
//! zone, which cron schedules without an explicit `timezone` are evaluated in,
//! as the original does (SPEC §2.2).
//!
//! ```
//! use loops_core::{initial_next_run, Schedule, Timestamp};
//! let now: Timestamp = "2026-01-01T00:07:00Z".parse().unwrap();
//! let every = Schedule::Interval { every_ms: 60_000, anchor: None };
//! assert_eq!(
//!     initial_next_run(&every, now).unwrap().unwrap().to_string(),
//!     "2026-01-01T00:08:00.000Z"
//! );
//! ```

mod agent_output;
mod chain;
mod clock;
mod cost_cap;
mod cron;
mod duration;
mod failure;
mod id;
mod liveness;
mod model;
mod ownership;
mod placement;
mod run_json;
mod schedule;
mod status;
mod tagged;
mod terminal;
mod time;
mod triggers;
mod tz;
mod usd;
mod validate;
mod workflow_file;

pub use crate::agent_output::{
    AgentReport, MAX_AGENT_RESULT_BYTES, TokenUsage, parse as parse_agent_output,
};
pub use crate::chain::{after_cycle, cycle_text};
pub use crate::clock::{Clock, ManualClock};
pub use crate::cost_cap::{cost_cap_reason, day_start};
pub use crate::cron::{CronError, CronExpr, Zone, next_cron_run, zone_name};
pub use crate::duration::{
    DURATION_FORMS, DurationError, MAX_DURATION_MS, bare_milliseconds, duration_text,
    parse_duration, parse_positive_duration,
};
pub use crate::failure::{
    Classified, FailureClass, FailureInput, THROTTLED_RETRY_MULTIPLIER, classify, fingerprint,
    retry_at,
};
pub use crate::id::{
    EventId, IdError, LeaseId, LoopId, RunId, StepRunId, WorkflowId, WorkflowRunId, is_id,
};
pub use crate::liveness::{Liveness, ProcessRef};
pub use crate::model::{
    AGENT_IDLE_TIMEOUT_ENV, Account, AgentAllowlist, AgentTarget, BUFFERED_AGENT_IDLE_TIMEOUT_MS,
    CommandTarget, DEFAULT_CATCH_UP_LIMIT, DEFAULT_DYNAMIC_INTERVAL_MS, DEFAULT_LEASE_MS,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_RETRY_DELAY_MS, DEFAULT_RETRY_DELAY_MS, DEFAULT_TIMEOUT_MS,
    DaemonLease, ExecutorResult, Hooks, Loop, LoopPolicy, LoopRun, MAX_CATCH_UP_LIMIT,
    MAX_LABEL_LEN, NewLoop, NewWorkflow, ProcessTarget, RunFacts, STREAMING_AGENT_IDLE_TIMEOUT_MS,
    Schedule, Step, StepRun, Target, Timers, WallClock, WorkflowEvent, WorkflowRun, WorkflowSpec,
    WorkflowTarget, agent_timers, default_agent_idle_ms, effective_timers, loop_workflow_key,
};
pub use crate::ownership::{Ownership, ownership};
pub use crate::placement::{ANY_PLACEMENT, host_label, missing_labels, placement_matches};
pub use crate::run_json::{redacted_len, run_json, streams_json};
pub use crate::schedule::{
    LoopAdvance, ScheduleError, Streak, compute_next_after, due_slots, fire_times,
    initial_next_run, is_expired, parse_schedule_at, plan_advance, plan_advance_with,
    retry_delay_ms, validate_schedule,
};
pub use crate::status::{
    AgentProvider, Anchor, Backoff, CatchUp, ConfigIsolation, EnumError, ExecutorStatus,
    LoopStatus, Overlap, PermissionMode, RunStatus, StepRunStatus, WorkflowRunStatus,
    WorkflowStatus, WorktreeMode,
};
pub use crate::terminal::{escape_for_terminal, hides_on_terminal};
pub use crate::time::{Timestamp, TimestampError};
pub use crate::triggers::{
    AfterEdge, AfterOn, DEFAULT_WATCH_DEBOUNCE_MS, MAX_TRIGGER_PAYLOAD, MAX_TRIGGER_PAYLOAD_ENV,
    MAX_WATCH_DEBOUNCE_MS, MAX_WATCH_PATH_LEN, MAX_WATCH_PATHS, TriggerKind, Watch,
};
pub use crate::tz::{Tz, TzOffset, UnknownTz};
pub use crate::usd::{Usd, UsdError};
pub use crate::validate::{
    AgentOption, ValidationError, agent_value_reads_as_option, prompt_option_message,
    prompt_reads_as_option, sandboxes, validate_account, validate_agent_options, validate_env_name,
    validate_label, validate_name, validate_new_loop, validate_pool_name, validate_process_target,
    validate_target, workflow_execution_order, workflow_from_json, workflow_warnings,
};
pub use crate::workflow_file::{
    MAX_WORKFLOW_PARALLEL, WorkflowFile, WorkflowFileError, read_workflow_text,
    workflow_file_schema,
};

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
