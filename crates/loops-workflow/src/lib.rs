//! Workflow runs, the scheduler tick and the daemon loop.
//!
//! This crate composes the store and the executor: [`tick`] plans due slots,
//! claims them, executes them through a [`RunExecutor`] and finalizes each
//! run together with its loop's advance. Time comes from a [`Clock`], so
//! tests drive ticks with a [`ManualClock`] and a fake executor.
//! [`execute_workflow`] runs a stored workflow's steps (SPEC §6), directly
//! or as a loop's target through [`ProcessExecutor`].
//!
//! Architecture invariant: nothing here spawns processes or writes SQL
//! directly; those go through `loops_exec` and `loops_store`.

mod clock;
mod daemon;
mod dispatch;
mod doctor;
mod executor;
mod pool;
mod scheduler;
mod settings;
mod workflow;

pub use crate::clock::{Clock, ManualClock, SystemClock};
pub use crate::daemon::{
    DEFAULT_GRACE, DEFAULT_LEASE_TTL, DEFAULT_MAX_SLEEP, DaemonError, DaemonExit, DaemonLog,
    DaemonOptions, DaemonPaths, DaemonStatus, EnableResult, Installed, LOG_FILE, LogConfig,
    LoopCounts, PID_FILE, Platform, RunCounts, SOCKET_FILE, ServiceSpec, StartOutcome, StopOutcome,
    Uninstalled, daemon_status, enable_startup, follow, format_line, install_startup,
    launchd_plist, notify_daemon, read_pid, run_daemon, service_path, start_daemon, stop_daemon,
    systemd_unit, tail_lines, uninstall_startup, unload_instructions,
};
pub use crate::doctor::{Check, CheckStatus, DoctorOptions, DoctorReport, run_doctor};
pub use crate::executor::{ProcessExecutor, RunControl, RunExecutor, loop_metadata};
pub use crate::scheduler::{
    DEFAULT_MAX_PARALLEL, SchedulerError, TickOptions, TickResult, heartbeat_period,
    manual_run_scheduled_for, run_now, should_advance_manual_run, tick,
};
pub use crate::settings::ExecSettings;
pub use crate::workflow::{
    DEFAULT_CANCEL_POLL, STEP_OUTPUT_SUMMARY_BYTES, WorkflowError, WorkflowOutcome,
    WorkflowRunOptions, execute_workflow, preflight_new_workflow, preflight_workflow,
    workflow_result,
};
