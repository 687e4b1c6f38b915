//! How the executor runs targets: [`ExecOptions`], the settings a runner
//! keeps for all its runs (SPEC §5.3, §5.7), and [`RunContext`], what one
//! run brings besides (its clock, its cancel token, its spawn id).
//!
//! The split keeps a runner from copying its settings, and the environment
//! in them, for every run: the options are borrowed, and only the small
//! context is built per run.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use loops_core::Clock;

use crate::cancel::CancelToken;
use crate::clock::SystemClock;
use crate::output::DEFAULT_MAX_OUTPUT_BYTES;
use crate::output_seen::OutputSeen;
use crate::runlog::RunLog;

/// The default time between SIGTERM and SIGKILL: 2 s.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
/// The default wait for a run's pipes to reach EOF after its leader exited.
pub const DEFAULT_LEAK_TIMEOUT: Duration = Duration::from_millis(500);
/// The default timeout of one `accounts env` call: 30 s.
pub const DEFAULT_ACCOUNTS_TIMEOUT: Duration = Duration::from_secs(30);
/// The default timeout of one `git` call that prepares, removes or sweeps a
/// worktree: 5 minutes, as 0.5.11 (agents note §8.3).
pub const DEFAULT_GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// How a runner turns targets into processes: the same for every run, so a
/// loop's command and a workflow's steps run under the same environment,
/// output cap and kill grace. [`ExecOptions::default`] gives the SPEC
/// defaults and the process environment.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecOptions {
    /// The environment children start from (SPEC §5.3 step 1); `None` is
    /// the process environment.
    pub base_env: Option<BTreeMap<String, String>>,
    /// Per-stream capture cap in bytes (the tail is kept); also the cap of a
    /// workflow's summary stdout (SPEC §9 item 25).
    pub max_output_bytes: usize,
    /// Time between SIGTERM and SIGKILL when a group is torn down.
    pub kill_grace: Duration,
    /// How long to wait for the pipes to reach EOF after the leader exited,
    /// before tearing down whatever still holds them.
    pub leak_timeout: Duration,
    /// Timeout of the `accounts env` call.
    pub accounts_timeout: Duration,
    /// Timeout of each `git` call around an agent's worktree (issue 27).
    pub git_timeout: Duration,
    /// Values masked in what every run stores and logs and in what a hook
    /// reports, beside each run's own (issue 25 §2): the password of the
    /// database the runner uses, in each spelling its connection string
    /// holds. Values shorter than 8 bytes are not masked, as a run's own
    /// are not: a short password is usually a word, which masking would
    /// rewrite everywhere and so give away (see the `scrub` module).
    pub secret_values: Vec<String>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            base_env: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            kill_grace: DEFAULT_KILL_GRACE,
            leak_timeout: DEFAULT_LEAK_TIMEOUT,
            accounts_timeout: DEFAULT_ACCOUNTS_TIMEOUT,
            git_timeout: DEFAULT_GIT_TIMEOUT,
            secret_values: Vec::new(),
        }
    }
}

impl fmt::Debug for ExecOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The environment holds credentials: show only its size.
        f.debug_struct("ExecOptions")
            .field(
                "base_env",
                &self
                    .base_env
                    .as_ref()
                    .map(|e| format!("{} variables", e.len())),
            )
            .field("max_output_bytes", &self.max_output_bytes)
            .field("kill_grace", &self.kill_grace)
            .field("leak_timeout", &self.leak_timeout)
            .field("accounts_timeout", &self.accounts_timeout)
            .field("git_timeout", &self.git_timeout)
            .field(
                "secret_values",
                &format!("{} values", self.secret_values.len()),
            )
            .finish()
    }
}

/// What one run brings besides the runner's [`ExecOptions`].
/// [`RunContext::default`] gives the system clock, no cancel and no spawn
/// id.
#[derive(Clone, Copy)]
pub struct RunContext<'a> {
    /// Where `startedAt` and `finishedAt` come from. Durations are measured
    /// with [`Instant`](std::time::Instant) regardless.
    pub clock: &'a dyn Clock,
    /// Kills the run (and aborts `accounts env`) when cancelled.
    pub cancel: Option<&'a CancelToken>,
    /// The run-level spawn id the runner records with the run
    /// ([`new_spawn_id`](crate::new_spawn_id)). Every process of the run,
    /// `accounts env` included, carries it in `LOOPS_SPAWN_ID`, after the
    /// ids of the runs this runner is itself part of and before the
    /// spawn's own cookie, so that a recovery after a crash finds also the
    /// processes that left the run's process group.
    pub spawn_id: Option<&'a str>,
    /// The run's log file ([`RunLog`]), which gets the run's output, line by
    /// line and scrubbed, as it is produced; `None` keeps no log.
    pub log: Option<&'a RunLog>,
    /// Marked whenever the run prints (issue 27), so the runner can record
    /// how long it has been silent; `None` keeps no mark.
    pub output_seen: Option<&'a OutputSeen>,
}

impl Default for RunContext<'_> {
    fn default() -> Self {
        RunContext {
            clock: &SystemClock,
            cancel: None,
            spawn_id: None,
            log: None,
            output_seen: None,
        }
    }
}

impl fmt::Debug for RunContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunContext")
            .field("cancel", &self.cancel)
            .field("spawn_id", &self.spawn_id)
            .field("log", &self.log.map(RunLog::path))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_contexts_can_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<ExecOptions>();
        send_sync::<RunContext<'static>>();
    }

    #[test]
    fn debug_output_hides_the_environment() {
        let opts = ExecOptions {
            base_env: Some(BTreeMap::from([(
                "ANTHROPIC_API_KEY".to_owned(),
                "secret".to_owned(),
            )])),
            secret_values: vec!["db-password".to_owned()],
            ..ExecOptions::default()
        };
        let shown = format!("{opts:?}");
        assert!(
            shown.contains("1 variables")
                && shown.contains("1 values")
                && !shown.contains("secret\"")
                && !shown.contains("db-password"),
            "{shown}"
        );
    }
}
