//! Failure and success hooks (issue 17): after a run is finally recorded,
//! the dispatcher starts its loop's hook on a thread of its own, so a slow
//! hook never holds up the store thread, and reports a hook's failure on
//! the store thread (`on_hook_error`: the daemon log, or stderr for `tick`
//! and `run-now`). A hook never changes its run.
//!
//! A run is final when no retry of its slot is pending: a `failed` or
//! `timed_out` run whose attempts are used up (or that is not advanced, an
//! ad-hoc manual run) runs `onFailure`, else the runner's default; a
//! `succeeded` run runs `onSuccess`. A run a daemon shutdown released is
//! not final: its slot runs again.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use loops_core::{Loop, LoopRun, RunStatus, Target, run_json};
use loops_exec::{DEFAULT_HOOK_TIMEOUT, ExecOptions, Hook, run_hook};

use super::Report;

/// How a runner runs hooks, beside each loop's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSettings {
    /// The `onFailure` of every loop without its own (`daemon run
    /// --on-failure`).
    pub default_on_failure: Option<String>,
    /// How long a hook may run before its group is killed.
    pub timeout: Duration,
}

/// No default hook and the default timeout: only the loops' own hooks.
static NO_HOOKS: HookSettings = HookSettings {
    default_on_failure: None,
    timeout: DEFAULT_HOOK_TIMEOUT,
};

impl HookSettings {
    /// The settings of a runner without a default hook, for callers that
    /// have none to give.
    pub fn none() -> &'static HookSettings {
        &NO_HOOKS
    }
}

impl Default for HookSettings {
    fn default() -> HookSettings {
        NO_HOOKS.clone()
    }
}

/// The hooks a dispatcher started and what they reported.
pub(super) struct HookRunner<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    running: Vec<ScopedJoinHandle<'scope, ()>>,
    failures_tx: Sender<String>,
    failures: Receiver<String>,
}

impl<'scope, 'env> HookRunner<'scope, 'env> {
    pub(super) fn new(scope: &'scope Scope<'scope, 'env>) -> HookRunner<'scope, 'env> {
        let (failures_tx, failures) = mpsc::channel();
        HookRunner {
            scope,
            running: Vec::new(),
            failures_tx,
            failures,
        }
    }

    /// Starts the hook `run` calls for, if any; `wake` hears when it
    /// failed, so its report is logged without waiting for the next run.
    ///
    /// The hook runs with the runner's `exec` options (`None`: the
    /// defaults): its base environment, less the credentials `run_hook`
    /// removes, and the secret values its report is masked of.
    pub(super) fn start(
        &mut self,
        settings: &HookSettings,
        exec: Option<&ExecOptions>,
        lp: &Loop,
        run: &LoopRun,
        wake: Sender<Report>,
    ) {
        let Some((kind, hook)) = hook_for(settings, lp, run) else {
            return;
        };
        let failures = self.failures_tx.clone();
        let what = format!(
            "{kind} hook of loop {} ({}) for run {}",
            lp.name, lp.id, run.id
        );
        let exec = exec.cloned().unwrap_or_default();
        self.running.retain(|h| !h.is_finished());
        self.running.push(self.scope.spawn(move || {
            if let Err(why) = run_hook(&hook, &exec) {
                let _ = failures.send(format!("{what} failed: {why}"));
                let _ = wake.send(Report::Wake);
            }
        }));
    }

    /// Reports the failures that arrived, through `report`.
    pub(super) fn report(&self, report: Option<&dyn Fn(&str)>) {
        while let Ok(message) = self.failures.try_recv() {
            if let Some(report) = report {
                report(&message);
            }
        }
    }

    /// Waits for every hook to end (`tick`, `run-now`: before they return),
    /// then reports the failures.
    pub(super) fn wait(&mut self, report: Option<&dyn Fn(&str)>) {
        for handle in self.running.drain(..) {
            let _ = handle.join();
        }
        self.report(report);
    }
}

/// The hook `run` of `lp` calls for, with its kind (`on-failure`,
/// `on-success`), if any.
fn hook_for(settings: &HookSettings, lp: &Loop, run: &LoopRun) -> Option<(&'static str, Hook)> {
    let (kind, command) = match run.status {
        RunStatus::Succeeded => ("on-success", lp.hooks.on_success.as_ref()?),
        RunStatus::Failed | RunStatus::TimedOut => (
            "on-failure",
            lp.hooks
                .on_failure
                .as_ref()
                .or(settings.default_on_failure.as_ref())?,
        ),
        _ => return None,
    };
    let cwd = match &lp.target {
        Target::Command(c) => c.cwd.clone(),
        Target::Agent(a) => a.cwd.clone(),
        Target::Workflow(_) => None,
    };
    let mut stdin = run_json(run, lp.hooks.hook_show_output).to_string();
    stdin.push('\n');
    let vars = [
        ("LOOPS_LOOP_ID", lp.id.to_string()),
        ("LOOPS_LOOP_NAME", lp.name.clone()),
        ("LOOPS_RUN_ID", run.id.to_string()),
        ("LOOPS_RUN_STATUS", run.status.as_str().to_owned()),
        ("LOOPS_SCHEDULED_FOR", run.scheduled_for.to_string()),
    ];
    Some((
        kind,
        Hook {
            command: command.clone(),
            cwd,
            stdin: stdin.into_bytes(),
            vars: vars.map(|(k, v)| (k.to_owned(), v)).into(),
            timeout: settings.timeout,
        },
    ))
}
