//! Turning targets into processes (SPEC §5).
//!
//! [`execute_target`] runs a command or agent target to completion and
//! returns an [`ExecutorResult`](loops_core::ExecutorResult):
//! - the program and argv come from the target ([`agent_argv`] for agents,
//!   SPEC §5.2), exec'd directly or through `/bin/sh -c`;
//! - the environment is rebuilt from scratch (SPEC §5.3): base environment,
//!   account variables from `accounts env` (SPEC §5.4), the target's `env`,
//!   the normalized `PATH` ([`normalize_path`], SPEC §5.5) and the `LOOPS_*`
//!   metadata ([`RunMetadata`]);
//! - the working directory and executable are checked first, against the
//!   target's cwd ([`preflight_target`] does only these checks);
//! - loops' own database credentials are never passed on, and for an
//!   account the runner's own credentials are removed first (the two lists
//!   of `credentials.rs`); what the run stores (stdout, stderr, error) is
//!   scrubbed of the values of its `env` and account variables, of the
//!   database's password and of anything shaped like a token;
//! - an agent that asks for a git worktree runs in one of its own, named
//!   after the run, which a succeeded run removes when it is clean
//!   ([`sweep_worktrees`] is `loops gc`'s part; agents note §8);
//! - the child leads its own process group; its output is drained to EOF
//!   and bounded by bytes, keeping the tail;
//! - a timeout, a [`CancelToken`] or the end of the run tear the whole group
//!   down with SIGTERM, a grace period and SIGKILL; a timeout, a cancel or
//!   members left behind by the leader also bring down, on Linux, the
//!   processes that left the group but carry the spawn's `LOOPS_SPAWN_ID`
//!   cookie.
//!
//! ```
//! use loops_core::{CommandTarget, ExecutorStatus, ProcessTarget};
//! use loops_exec::{execute_target, ExecOptions, RunContext, RunMetadata};
//!
//! let mut cmd = CommandTarget::new("printf hello");
//! cmd.shell = Some(true);
//! let result = execute_target(
//!     &ProcessTarget::Command(cmd),
//!     &RunMetadata::default(),
//!     &ExecOptions::default(),
//!     &RunContext::default(),
//!     &mut |_spawned| {},
//! )?;
//! assert_eq!(result.status, ExecutorStatus::Succeeded);
//! assert_eq!(result.stdout, "hello");
//! # Ok::<(), loops_exec::ExecError>(())
//! ```
//!
//! This crate also owns the production liveness probe, [`SystemProbe`],
//! that the store is handed.
//!
//! Architecture invariant: this is the only crate that spawns or signals
//! processes, and the only one that uses nix.

mod account;
mod cancel;
mod clock;
mod cookie;
mod credentials;
mod env;
mod error;
mod execute;
mod group;
mod hook;
mod liveness;
mod options;
mod output;
mod output_seen;
pub mod owner_only;
mod path;
mod pool;
mod process;
mod prompt_file;
mod runlog;
mod scrub;
mod signals;
mod spec;
mod supervise;
mod user_file;
mod worktree;

pub use crate::cancel::{CancelToken, Subscription};
pub use crate::clock::SystemClock;
pub use crate::cookie::new_spawn_id;
pub use crate::env::RunMetadata;
pub use crate::error::{CwdError, ExecError};
pub use crate::execute::{Preflight, execute_target, preflight_target};
pub use crate::hook::{DEFAULT_HOOK_TIMEOUT, Hook, run_hook};
pub use crate::liveness::{
    BootId, ProcessIdentity, SystemProbe, is_same_process, process_identity, process_start_ms,
};
pub use crate::options::{
    DEFAULT_ACCOUNTS_TIMEOUT, DEFAULT_GIT_TIMEOUT, DEFAULT_KILL_GRACE, DEFAULT_LEAK_TIMEOUT,
    ExecOptions, RunContext,
};
pub use crate::output::DEFAULT_MAX_OUTPUT_BYTES;
pub use crate::output_seen::OutputSeen;
pub use crate::path::{dropped_path_entries, normalize_path};
pub use crate::pool::Pool;
pub use crate::process::{
    Detached, OrphanKill, Orphans, ProcessSignal, hostname, is_running, kill_orphans,
    signal_process, spawn_detached, started_by,
};
pub use crate::runlog::{LOGS_DIR, RunLog, prepare_logs_dir, run_id_of_log, run_log_path};
pub use crate::scrub::mask_credentials;
pub use crate::signals::{SignalCancel, survive_file_size_limit};
pub use crate::spec::agent_argv;
pub use crate::user_file::{
    PROMPT_FILE_MAX_BYTES, UserFileError, UserFileReader, open_user_file, read_user_file,
};
pub use crate::worktree::{SweepWorktrees, SweptWorktree, WorktreeSweep, sweep_worktrees};

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
