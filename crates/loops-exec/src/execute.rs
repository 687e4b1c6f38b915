//! [`execute_target`] and [`preflight_target`]: the executor's entry points
//! (SPEC §5.6, §5.7).
//!
//! The order of a run: record `startedAt`; read an agent's prompt file,
//! within the run's timeout and until its cancel (`prompt_file.rs`); build
//! the environment (which runs `accounts env` and raises its errors); check
//! the working directory and the executable; enter an agent's git
//! worktree when it asks for one (`worktree.rs`, agents note §8); spawn;
//! report the process identity through `on_spawn`; supervise to the end;
//! map the outcome to an [`ExecutorResult`], whose stdout, stderr and error
//! are scrubbed of the run's secrets (`scrub.rs`); and last, remove a
//! succeeded run's clean worktree. Loops' own notes about the run (a
//! fallback program, the worktree) are `loops:` lines around its stderr.
//!
//! Job failures are data. Only the account errors of SPEC §5.4 are `Err`;
//! a bad cwd, a missing executable, a worktree that `required` could not
//! get, a spawn error, a non-zero exit, a
//! timeout and a cancel are all an `Ok` result with status failed or
//! timed_out and an `error`; so is a prompt file whose read outlived the
//! run's timeout (timed_out) or was cancelled (failed). A result whose process never started has no
//! pid, no exit code, empty output and a duration of 0.
//!
//! The cause of a kill is recorded as it happened (SPEC §9 item 15): a
//! timeout stays `timed out after <ms>ms`, the idle watchdog `idle timed out
//! after <ms>ms without stdout/stderr` (issue 27), and a cancel stays
//! `cancelled` (or the token's reason), never overwritten by `terminated by
//! SIGTERM` as the original did. Only a signal loops did not send is
//! reported as `terminated by <SIG>`.
//!
//! A run's timers are `loops_core::effective_timers` of its target and the
//! runner's `LOOPS_AGENT_IDLE_TIMEOUT_MS`. An agent that exits 0 is still
//! `failed` when it printed nothing, or when it is claude and its JSON says
//! `"is_error": true` (see `outcome`).

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use loops_core::{
    AGENT_IDLE_TIMEOUT_ENV, AgentProvider, AgentReport, ExecutorResult, ExecutorStatus, ProcessRef,
    ProcessTarget, RunFacts, Timers, effective_timers, parse_agent_output,
};
use nix::sys::signal::Signal;
use serde::Serialize;

use crate::cancel::CancelToken;
use crate::env::{RunMetadata, build_env};
use crate::error::ExecError;
use crate::liveness::process_start_ms;
use crate::options::{ExecOptions, RunContext};
use crate::path::{check_cwd, find_program};
use crate::prompt_file::{Interrupted, PromptRead, Reader, file_reader};
use crate::runlog::{LogTee, Stream};
use crate::scrub::Secrets;
use crate::spec::{ProcessSpec, Program};
use crate::supervise::{self, Cause, Finished, Launch, Limits};
use crate::worktree::{self, Entry};

/// What [`preflight_target`] found (SPEC §5.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    /// The target's command, or the agent's binary.
    pub command: String,
    /// The account profile, when the target has an account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_profile: Option<String>,
    /// The account tool; always set for agents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_tool: Option<String>,
}

/// Checks that `target` could start, without starting it: builds its
/// environment (this really runs `accounts env`), then checks its working
/// directory and its executable: a shell command's only when it starts
/// with a plain path.
pub fn preflight_target(
    target: &ProcessTarget,
    meta: &RunMetadata,
    opts: &ExecOptions,
) -> Result<Preflight, ExecError> {
    let reader = file_reader();
    let read = PromptRead {
        cancel: None,
        step: meta.workflow_step_id.as_deref(),
        reader: &reader,
    };
    let spec = match ProcessSpec::of(target, &read, timers_of(target, opts)) {
        Ok(spec) => spec,
        Err(Interrupted::TimedOut(reason) | Interrupted::Cancelled(reason)) => {
            return Err(ExecError::Refused { reason });
        }
    };
    if let Some(reason) = &spec.refused {
        return Err(ExecError::Refused {
            reason: reason.clone(),
        });
    }
    let (env, _) = build_env(&spec, meta, opts, &RunContext::default())?;
    let cwd = spec.cwd.map(check_cwd).transpose()?;
    let mut command = spec.command;
    match &spec.program {
        Program::Exec { program, .. } => {
            command = find_program(program, spec.fallback, path_of(&env), &lookup_dir(cwd))?.name;
        }
        // A shell command that starts with a plain path (`./build.sh`)
        // gets that path checked too (issue 28); other scripts are the
        // shell's to read.
        Program::Shell { script } => {
            if let Some(program) = loops_core::CommandTarget::shell_program(script) {
                find_program(program, None, path_of(&env), &lookup_dir(cwd))?;
            }
        }
    }
    Ok(Preflight {
        command: command.to_owned(),
        account_profile: spec.account.map(|a| a.profile.clone()),
        account_tool: spec.account_tool(),
    })
}

/// Runs `target` to completion (SPEC §5.7), with the runner's `opts` and
/// this run's `ctx`.
///
/// `on_spawn` is called right after the spawn with the child's pid and
/// start time, so the caller can record the process identity before the
/// child has done anything.
///
/// Returns `Err` only for the account errors of SPEC §5.4, which are raised
/// before anything is spawned. Every other failure is an `Ok` result with
/// status failed or timed_out.
///
/// ```
/// use std::collections::BTreeMap;
/// use loops_core::{CommandTarget, ExecutorStatus, ProcessTarget};
/// use loops_exec::{ExecOptions, RunContext, RunMetadata, execute_target};
///
/// let mut cmd = CommandTarget::new(r#"printf 'key=%s' "$API_KEY"; exit 3"#);
/// cmd.shell = Some(true); // through /bin/sh -c
/// let key = ("API_KEY".to_owned(), "correct-horse-battery".to_owned());
/// cmd.env = Some(BTreeMap::from([key]));
/// let mut spawned = None;
/// let result = execute_target(
///     &ProcessTarget::Command(cmd),
///     &RunMetadata::default(),
///     &ExecOptions::default(),
///     &RunContext::default(),
///     &mut |child| spawned = Some(child.pid),
/// )?;
/// // A non-zero exit is a failed result, not an `Err`.
/// assert_eq!(result.status, ExecutorStatus::Failed);
/// assert_eq!(result.exit_code, Some(3));
/// assert_eq!(result.error.as_deref(), Some("process exited with code 3"));
/// assert_eq!(result.pid, spawned);
/// // What a run returns never holds the values of its own `env`.
/// assert_eq!(result.stdout, "key=[redacted]");
/// # Ok::<(), loops_exec::ExecError>(())
/// ```
pub fn execute_target(
    target: &ProcessTarget,
    meta: &RunMetadata,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
    on_spawn: &mut dyn FnMut(ProcessRef),
) -> Result<ExecutorResult, ExecError> {
    execute_with(target, meta, opts, ctx, on_spawn, &file_reader())
}

/// [`execute_target`], its prompt file read by `reader` (tests give one
/// that blocks).
fn execute_with(
    target: &ProcessTarget,
    meta: &RunMetadata,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
    on_spawn: &mut dyn FnMut(ProcessRef),
    reader: &Reader,
) -> Result<ExecutorResult, ExecError> {
    // SPEC §5.7: startedAt is taken before the environment is resolved.
    let started_at = ctx.clock.now();
    let start = Instant::now();
    // Nothing ran, so nothing lasted: the duration is 0 whatever the clock.
    let not_started = |error: String| ExecutorResult {
        duration_ms: 0,
        ..ExecutorResult::failed(error, started_at, ctx.clock.now())
    };
    let cancelled = || ctx.cancel.and_then(CancelToken::reason);
    if let Some(reason) = cancelled() {
        return Ok(not_started(reason));
    }

    // Issue 25 §1: the prompt file is read within the run's timeout and
    // until its cancel, so a file on a hung mount cannot hold the run.
    let read = PromptRead {
        cancel: ctx.cancel,
        step: meta.workflow_step_id.as_deref(),
        reader,
    };
    let spec = match ProcessSpec::of(target, &read, timers_of(target, opts)) {
        Ok(spec) => spec,
        Err(Interrupted::Cancelled(reason)) => return Ok(not_started(reason)),
        Err(Interrupted::TimedOut(error)) => {
            return Ok(ExecutorResult {
                status: ExecutorStatus::TimedOut,
                ..not_started(error)
            });
        }
    };
    if let Some(error) = &spec.refused {
        return Ok(not_started(error.clone()));
    }
    let (env, secrets) = match build_env(&spec, meta, opts, ctx) {
        Ok(built) => built,
        Err(ExecError::Cancelled { reason }) => return Ok(not_started(reason)),
        Err(e) => return Err(e),
    };
    // Issue 12 §2: what the run stores never holds its own `env` values or
    // its account's variables.
    let not_started = |error: String| not_started(secrets.mask_values(&error).into_owned());
    let cwd = match spec.cwd.map(check_cwd).transpose() {
        Ok(cwd) => cwd,
        Err(e) => return Ok(not_started(e.to_string())),
    };
    let shell_args;
    let mut notes = Vec::new();
    let (program, arg0, args) = match &spec.program {
        Program::Shell { script } => {
            shell_args = ["-c".to_owned(), script.clone()];
            (PathBuf::from("/bin/sh"), "/bin/sh", &shell_args[..])
        }
        Program::Exec { program, args } => {
            let dir = lookup_dir(cwd.clone());
            match find_program(program, spec.fallback, path_of(&env), &dir) {
                Ok(found) => {
                    notes.extend(found.note);
                    (found.path, found.name, &args[..])
                }
                Err(e) => return Ok(not_started(e.to_string())),
            }
        }
    };
    // Issue 27: the agent's worktree, after the checks of its cwd and
    // program, as 0.5.11 orders them (agents note §1 steps 5 and 6).
    let entry = match target {
        ProcessTarget::Agent(a) => worktree::enter(a, cwd.as_deref(), meta, &env, opts, ctx),
        ProcessTarget::Command(_) => Entry::AsBuilt(None),
    };
    let rebuilt;
    let (cwd, args, worktree) = match entry {
        Entry::AsBuilt(fell_back) => {
            notes.extend(fell_back);
            (cwd, args, None)
        }
        Entry::Entered { worktree, args } => {
            notes.push(format!(
                "loops: entered worktree {} branch {}",
                worktree.path.display(),
                worktree.branch
            ));
            rebuilt = args;
            (Some(worktree.cwd.clone()), &rebuilt[..], Some(worktree))
        }
        Entry::Failed(error) => return Ok(not_started(error)),
    };
    // A cancel that arrived during `accounts env` or the checks.
    if let Some(reason) = cancelled() {
        return Ok(not_started(reason));
    }

    let launch = Launch {
        program: &program,
        arg0,
        args,
        cwd: cwd.as_deref(),
        env: &env,
        // Agents note §2.3: the prompt, then EOF; written from a thread of
        // its own (`supervise::spawn`), so a child that never reads cannot
        // hold the run, its timeout or its cancel.
        stdin: spec.stdin.as_deref().map(str::as_bytes),
    };
    let running = match supervise::spawn(&launch) {
        Ok(running) => running,
        Err(e) => {
            let place = cwd.as_ref().map_or_else(
                || "the current directory".to_owned(),
                |c| c.display().to_string(),
            );
            return Ok(not_started(format!(
                "failed to spawn {arg0} in {place}: {e}"
            )));
        }
    };
    let notes: Vec<String> = notes
        .iter()
        .map(|n| secrets.mask_values(n).into_owned())
        .collect();
    note_in_log(ctx, &secrets, opts, &notes);
    let pid = running.pid();
    on_spawn(ProcessRef {
        pid,
        start: process_start_ms(pid),
    });
    let finished = running.supervise(&Limits {
        timeout: spec.timers.wall_ms.map(Duration::from_millis),
        idle: spec.timers.idle_ms.map(Duration::from_millis),
        cancel: ctx.cancel,
        kill_grace: opts.kill_grace,
        leak_timeout: opts.leak_timeout,
        max_output_bytes: opts.max_output_bytes,
        log: ctx.log.map(|log| (log, &secrets)),
        seen: ctx.output_seen,
    });
    // Issue 27: what the agent's machine output says of the run (agents
    // note §3), read once; its final message is scrubbed as stdout is.
    let provider = agent_provider(target);
    let report = provider.map(|p| parse_agent_output(p, &finished.stdout));
    let (status, error) = outcome(&finished, spec.timers, provider, report.as_ref());
    let mut facts = report.map_or_else(RunFacts::default, |mut report| {
        report.result = report.result.map(|text| secrets.scrub_output(text));
        RunFacts::default().with_report(report)
    });
    let (finished_at, duration_ms) = (
        ctx.clock.now(),
        i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX),
    );
    // Beyond 0.5.11: a succeeded run's clean worktree goes (`worktree.rs`).
    let mut after = Vec::new();
    if let Some(worktree) = &worktree {
        let keep = matches!(target, ProcessTarget::Agent(a) if a.keeps_worktree());
        let succeeded = status == ExecutorStatus::Succeeded;
        let note = worktree::finish(worktree, succeeded, keep, &env, opts, ctx);
        after.extend(note.map(|n| secrets.mask_values(&n).into_owned()));
        note_in_log(ctx, &secrets, opts, &after);
        facts.worktree = Some(worktree.path.display().to_string());
        facts.worktree_branch = Some(worktree.branch.clone());
    }
    Ok(ExecutorResult {
        status,
        exit_code: finished.status.and_then(|s| s.code()),
        stdout: secrets.scrub_output(finished.stdout),
        stderr: with_notes(&notes, secrets.scrub_output(finished.stderr), &after),
        error: error.map(|e| secrets.mask_values(&e).into_owned()),
        pid: Some(pid),
        started_at,
        finished_at,
        duration_ms,
        facts,
    })
}

/// Writes loops' own `notes` to the run's log, as stderr lines.
fn note_in_log(ctx: &RunContext<'_>, secrets: &Secrets, opts: &ExecOptions, notes: &[String]) {
    if let (false, Some(log)) = (notes.is_empty(), ctx.log) {
        let mut tee = LogTee::new(log, secrets, opts.max_output_bytes);
        for note in notes {
            tee.chunk(Stream::Stderr, format!("{note}\n").as_bytes());
        }
    }
}

/// The run's stderr between loops' own lines: those from before the spawn
/// (a fallback program, the worktree entered or fallen back from) and
/// those from after (what became of the worktree).
fn with_notes(before: &[String], stderr: String, after: &[String]) -> String {
    if before.is_empty() && after.is_empty() {
        return stderr;
    }
    let mut text = String::new();
    for note in before {
        text.push_str(note);
        text.push('\n');
    }
    text.push_str(&stderr);
    for note in after {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(note);
        text.push('\n');
    }
    text
}

/// The status and error of a finished run (SPEC §5.7 "Result"), after the
/// result guards of issue 27 (`agents-0.5.11.md` §4, §5, §6), in this
/// order: a timer that fired is `timed_out` (the idle watchdog's message
/// when it fired, which wins over the wall clock's); a cancel, a signal or
/// a non-zero exit is `failed`; an agent (`agent` is its provider) that
/// exited 0 with nothing on stdout or stderr is `failed` (§5.2); a claude
/// run that exited 0 while its JSON says `"is_error": true` is `failed`
/// (beyond 0.5.11, which records it succeeded).
fn outcome(
    finished: &Finished,
    timers: Timers,
    agent: Option<AgentProvider>,
    report: Option<&AgentReport>,
) -> (ExecutorStatus, Option<String>) {
    let failed = |error: &str| (ExecutorStatus::Failed, Some(error.to_owned()));
    match (&finished.cause, finished.status) {
        (Some(Cause::Idle), _) => (
            ExecutorStatus::TimedOut,
            Some(format!(
                "idle timed out after {}ms without stdout/stderr",
                timers.idle_ms.unwrap_or_default()
            )),
        ),
        (Some(Cause::TimedOut), _) => (
            ExecutorStatus::TimedOut,
            Some(format!(
                "timed out after {}ms",
                timers.wall_ms.unwrap_or_default()
            )),
        ),
        (Some(Cause::Cancelled(reason)), _) => failed(reason),
        (None, Some(status)) if status.success() => match agent {
            Some(_) if finished.stdout.trim().is_empty() && finished.stderr.trim().is_empty() => {
                failed(NO_OUTPUT)
            }
            Some(AgentProvider::Claude) if report.and_then(|r| r.is_error) == Some(true) => {
                failed(REPORTED_ERROR)
            }
            _ => (ExecutorStatus::Succeeded, None),
        },
        (None, status) => (ExecutorStatus::Failed, Some(failure(status))),
    }
}

/// The error of an agent that exited 0 and printed nothing (§5.2, as
/// 0.5.11 words it).
const NO_OUTPUT: &str = "agent exited 0 with no output on stdout or stderr: the provider \
                         produced nothing, so the run did no work and is not reported as \
                         succeeded";

/// The error of a claude run that exited 0 but reported an error.
const REPORTED_ERROR: &str = "agent reported an error (is_error) although it exited 0";

/// The provider of an agent target; `None` for a command.
fn agent_provider(target: &ProcessTarget) -> Option<AgentProvider> {
    match target {
        ProcessTarget::Agent(a) => Some(a.provider),
        ProcessTarget::Command(_) => None,
    }
}

/// The timers `target` runs with, `LOOPS_AGENT_IDLE_TIMEOUT_MS` read from
/// the runner's environment: its base environment, else its process's.
fn timers_of(target: &ProcessTarget, opts: &ExecOptions) -> Timers {
    let from_base = opts
        .base_env
        .as_ref()
        .and_then(|env| env.get(AGENT_IDLE_TIMEOUT_ENV).cloned());
    let value = from_base.or_else(|| std::env::var(AGENT_IDLE_TIMEOUT_ENV).ok());
    effective_timers(target, value.as_deref())
}

fn failure(status: Option<ExitStatus>) -> String {
    if let Some(signal) = status.and_then(|s| s.signal()) {
        let name = Signal::try_from(signal)
            .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned());
        return format!("terminated by {name}");
    }
    match status.and_then(|s| s.code()) {
        Some(code) => format!("process exited with code {code}"),
        None => "process exited with code unknown".to_owned(),
    }
}

fn path_of(env: &BTreeMap<String, String>) -> &str {
    env.get("PATH").map_or("", String::as_str)
}

/// Where relative program names are looked up: the target's cwd, else the
/// loops process's own. (The normalized PATH has no relative entries.)
fn lookup_dir(cwd: Option<PathBuf>) -> PathBuf {
    cwd.or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}

#[cfg(test)]
mod tests;
