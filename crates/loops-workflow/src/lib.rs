//! Workflow runs, the scheduler tick and the daemon loop.
//!
//! This crate composes the store and the executor: [`tick`] plans due slots,
//! claims them, executes them through a [`RunExecutor`] and finalizes each
//! run together with its loop's advance. Time comes from a [`Clock`], so
//! tests drive ticks with a [`ManualClock`] and a fake executor.
//!
//! Architecture invariant: nothing here spawns processes or writes SQL
//! directly; those go through `loops_exec` and `loops_store`.

mod clock;
mod executor;
mod scheduler;

pub use crate::clock::{Clock, ManualClock, SystemClock};
pub use crate::executor::{ProcessExecutor, RunControl, RunExecutor, loop_metadata};
pub use crate::scheduler::{
    DEFAULT_MAX_PARALLEL, SchedulerError, TickOptions, TickResult, heartbeat_period,
    manual_run_scheduled_for, run_now, should_advance_manual_run, tick,
};
