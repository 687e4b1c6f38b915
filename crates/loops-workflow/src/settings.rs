//! [`ExecSettings`]: how runners turn targets into processes, shared by the
//! scheduler's loop executor (`loops_scheduler::ProcessExecutor`) and the
//! workflow runner ([`execute_workflow`](crate::execute_workflow)),
//! so a loop's command steps and a workflow's steps run under the same
//! environment, output cap and kill grace (SPEC §5.3, §5.7).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use loops_core::Clock;
use loops_exec::{CancelToken, ExecOptions};

/// The process settings a runner passes to `loops_exec` for every child.
/// [`ExecSettings::default`] gives the SPEC defaults and the process
/// environment.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// The environment children start from (SPEC §5.3 step 1); `None` is
    /// the process environment.
    pub base_env: Option<BTreeMap<String, String>>,
    /// Per-stream output cap in bytes (the tail is kept); also the cap of a
    /// workflow's summary stdout (SPEC §9 item 25).
    pub max_output_bytes: usize,
    /// Time between SIGTERM and SIGKILL when a process group is torn down.
    pub kill_grace: Duration,
}

impl Default for ExecSettings {
    fn default() -> Self {
        let defaults = ExecOptions::default();
        ExecSettings {
            base_env: None,
            max_output_bytes: defaults.max_output_bytes,
            kill_grace: defaults.kill_grace,
        }
    }
}

impl fmt::Debug for ExecSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The environment holds credentials: show only its size.
        f.debug_struct("ExecSettings")
            .field(
                "base_env",
                &self
                    .base_env
                    .as_ref()
                    .map(|e| format!("{} variables", e.len())),
            )
            .field("max_output_bytes", &self.max_output_bytes)
            .field("kill_grace", &self.kill_grace)
            .finish()
    }
}

impl ExecSettings {
    /// The executor options for one child: these settings, the caller's
    /// clock and, when given, the token that kills the child.
    pub fn options<'c>(
        &self,
        clock: &'c dyn Clock,
        cancel: Option<CancelToken>,
    ) -> ExecOptions<'c> {
        ExecOptions {
            base_env: self.base_env.clone(),
            max_output_bytes: self.max_output_bytes,
            kill_grace: self.kill_grace,
            cancel,
            clock,
            ..ExecOptions::default()
        }
    }
}
