//! The loops scheduler: the tick, run-now, the dispatcher and the daemon's
//! serve loop (SPEC §3, §7.6).
//!
//! This crate composes the store, the executor and the workflow runner:
//! [`tick`] plans due slots, claims them, executes them through a
//! [`RunExecutor`] and finalizes each run together with its loop's advance;
//! [`run_now`] runs one manual slot. [`run_daemon`] keeps one dispatcher for
//! its whole life under the database lease, with crash recovery, wake-ups
//! and a graceful stop. Time comes from a [`Clock`](loops_core::Clock), so
//! tests drive ticks with a `ManualClock` and a fake executor ([`tick`]'s
//! example has one). [`ProcessExecutor`] is the production executor:
//! commands and agents through `loops_exec`, workflows through
//! `loops_workflow`.
//!
//! ```
//! use std::sync::Arc;
//! use loops_core::{CommandTarget, ManualClock, NewLoop, RunStatus, Schedule, Target, Timestamp};
//! use loops_scheduler::{DEFAULT_MAX_PARALLEL, ProcessExecutor, TickOptions, tick};
//! use loops_store::Store;
//!
//! let store = Store::open_in_memory(Arc::new(loops_exec::SystemProbe))?;
//! let now: Timestamp = "2026-01-01T00:00:00Z".parse()?;
//! let clock = ManualClock::new(now);
//! let target = Target::Command(CommandTarget::new("true"));
//! store.create_loop(&NewLoop::new("hello", Schedule::Once { at: now }, target), now)?;
//! let executor = ProcessExecutor::for_store(&clock, &store);
//! let opts = TickOptions {
//!     hooks: loops_scheduler::HookSettings::none(),
//!     on_hook_error: None,
//!     runner_id: "example",
//!     clock: &clock,
//!     executor: &executor,
//!     max_parallel: DEFAULT_MAX_PARALLEL,
//!     stop: None,
//!     on_run: None,
//!     on_error: None,
//! };
//! assert_eq!(tick(&store, &opts)?.completed[0].status, RunStatus::Succeeded);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The commands around the daemon (start, stop, status, logs, install,
//! doctor) are OS glue and live in the CLI.
//!
//! Architecture invariant: nothing here spawns processes or writes SQL
//! directly; those go through `loops_exec` and `loops_store`.

mod daemon;
mod dispatch;
mod executor;
mod scheduler;

pub use crate::daemon::{
    ClockSync, DEFAULT_GC_KEEP_PER_LOOP, DEFAULT_GRACE, DEFAULT_LEASE_TTL, DEFAULT_MAX_SLEEP,
    DaemonError, DaemonExit, DaemonOptions, DaemonPaths, DatabaseClock, GC_FIRST_DELAY, GC_PERIOD,
    GcReport, GcSettings, LOG_FILE, PID_FILE, POLL_ONLY_MAX_SLEEP, PidRecord, SKEW_WARN_MS,
    SOCKET_FILE, collect_garbage, notify_daemon, read_pid, read_pid_record, remove_pid_if,
    request_stop, run_daemon, sweep_run_logs,
};
pub use crate::dispatch::{HookSettings, Lanes, TickResult, heartbeat_period};
pub use crate::executor::{
    ProcessExecutor, RunControl, RunError, RunExecutor, mask_database_password,
};
pub use crate::scheduler::{
    DEFAULT_MAX_PARALLEL, SchedulerError, TickOptions, manual_run_scheduled_for, run_now,
    run_now_with, should_advance_manual_run, tick,
};

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
