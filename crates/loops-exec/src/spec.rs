//! From a target to what runs: the program, its argv, cwd, extra env,
//! timers (wall clock and idle watchdog), account and, for agents, the
//! prompt on stdin (SPEC §5.1, §5.2; agents note §2, §6).
//!
//! Agent argv is a pure function, [`agent_argv`], so every provider and
//! option is checked by table tests without spawning anything. It follows
//! 0.5.11's table (agents note §2.1), with one departure: `extraArgs` are
//! appended after the modeled flags, as 0.3.1 appended them, where 0.5.11
//! refuses any (§12.1 rule 8).
//!
//! **The prompt is not on argv** (agents note §2.3): it is written to the
//! agent's stdin, which is then closed, so no `ps` shows it. A prompt that
//! begins with `-` is therefore no risk and runs. The values that still
//! sit on argv after a flag (`model`, `agent`, `variant`, `sandbox`,
//! `addDirs`, and the cwd after `--cd`/`--dir`) are refused when they begin
//! with `-` (issue 25): the spec carries [`ProcessSpec::refused`], and the
//! executor reports it as a failed run without spawning anything. So is a
//! stored target that breaks 0.5.11's option rules, as 0.5.11 validates
//! again at run time (agents note §1 step 2), with the provider as label.

use std::collections::BTreeMap;
use std::time::Duration;

use loops_core::{
    Account, AgentOption, AgentProvider, AgentTarget, ConfigIsolation, PermissionMode,
    ProcessTarget, Timers, agent_value_reads_as_option, validate_agent_options,
};

use crate::prompt_file::{Interrupted, PromptError, PromptRead, read_prompt_file};

/// What the child executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Program {
    /// Exec'd directly: no shell, the arguments are passed as they are.
    Exec {
        /// The program as the target names it.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Run as `/bin/sh -c <script>`.
    Shell {
        /// The command text and its arguments, joined by spaces, unquoted
        /// (SPEC §5.7).
        script: String,
    },
}

/// The process a target describes (SPEC §5.1).
#[derive(Debug)]
pub(crate) struct ProcessSpec<'a> {
    /// What runs.
    pub(crate) program: Program,
    /// The target's `command` (or the provider binary): what preflight reports.
    pub(crate) command: &'a str,
    /// The program to run instead when [`Program::Exec`]'s is not on the
    /// PATH: `cursor-agent` for cursor (agents note §15 item 2).
    pub(crate) fallback: Option<&'static str>,
    /// Working directory.
    pub(crate) cwd: Option<&'a str>,
    /// Extra environment: a command's or an agent's `env`.
    pub(crate) env: Option<&'a BTreeMap<String, String>>,
    /// What the child reads on stdin, which is then closed: an agent's
    /// prompt. Commands read `/dev/null`.
    pub(crate) stdin: Option<String>,
    /// The run's wall clock and idle watchdog (issue 27).
    pub(crate) timers: Timers,
    /// The account to run under.
    pub(crate) account: Option<&'a Account>,
    /// The tool `accounts env` is asked for when the account names none:
    /// the provider's tool for agents, nothing for commands.
    pub(crate) tool_hint: Option<&'static str>,
    /// Why the target must not run at all: an agent option value that the
    /// agent would read as an option, or one 0.5.11's rules refuse. The
    /// run fails with this error before anything (even `accounts env`) is
    /// spawned.
    pub(crate) refused: Option<String>,
}

impl<'a> ProcessSpec<'a> {
    /// The spec of `target`, run with `timers`. An agent's prompt file is
    /// read now, as `read` says, within the wall clock, else the idle
    /// watchdog, else until a cancel (`prompt_file.rs`); a file that
    /// cannot be used makes the spec [`refused`](ProcessSpec::refused), a
    /// read that the timeout or a cancel ended is `Err`.
    pub(crate) fn of(
        target: &'a ProcessTarget,
        read: &PromptRead<'_>,
        timers: Timers,
    ) -> Result<ProcessSpec<'a>, Interrupted> {
        Ok(match target {
            ProcessTarget::Command(c) => {
                let program = if c.is_shell() {
                    let mut words = vec![c.command.as_str()];
                    words.extend(c.args().iter().map(String::as_str));
                    Program::Shell {
                        script: words.join(" "),
                    }
                } else {
                    Program::Exec {
                        program: c.command.clone(),
                        args: c.args().to_vec(),
                    }
                };
                ProcessSpec {
                    program,
                    command: &c.command,
                    fallback: None,
                    cwd: non_empty(c.cwd.as_deref()),
                    env: c.env.as_ref(),
                    stdin: c.stdin.clone(),
                    timers,
                    account: c.account.as_ref(),
                    tool_hint: None,
                    refused: None,
                }
            }
            ProcessTarget::Agent(a) => {
                // Issue 17: a prompt file is read now, at each run, so an
                // edit changes the next run; the stored `prompt` (the text
                // at create time) is never sent in its place.
                // Within the wall clock, else the idle watchdog (nothing is
                // printed meanwhile), else until a cancel.
                let timeout = timers
                    .wall_ms
                    .or(timers.idle_ms)
                    .map_or(Duration::MAX, Duration::from_millis);
                let (prompt, unreadable) = match &a.prompt_file {
                    None => (None, None),
                    Some(path) => match read_prompt_file(path, timeout, read) {
                        Ok(text) => (Some(text), None),
                        Err(PromptError::Unusable(error)) => (None, Some(error)),
                        Err(PromptError::Interrupted(why)) => return Err(why),
                    },
                };
                let (program, args) = agent_argv(a);
                let refused = unreadable
                    .or_else(|| agent_value_reads_as_option(a).map(|o| value_refusal(program, o)))
                    .or_else(|| {
                        validate_agent_options(a, a.provider.as_str())
                            .err()
                            .map(|e| format!("refused to run {program}: {e}"))
                    });
                ProcessSpec {
                    program: Program::Exec {
                        program: program.to_owned(),
                        args,
                    },
                    command: program,
                    fallback: a.provider.fallback_executable(),
                    cwd: non_empty(a.cwd.as_deref()),
                    env: a.env.as_ref(),
                    stdin: Some(prompt.unwrap_or_else(|| a.prompt.clone())),
                    timers,
                    account: a.account.as_ref(),
                    tool_hint: Some(a.provider.tool()),
                    refused,
                }
            }
        })
    }

    /// The account tool: the account's own, else the provider's. Always set
    /// for agents (SPEC §5.6), even without an account.
    pub(crate) fn account_tool(&self) -> Option<String> {
        self.account
            .and_then(|a| a.tool.clone())
            .or_else(|| self.tool_hint.map(str::to_owned))
    }
}

/// The error of a run whose agent option value begins with `-` (issue 25),
/// stored before create refused such values.
fn value_refusal(program: &str, option: AgentOption) -> String {
    format!(
        "refused to run {program}: the {key} begins with \"-\", which {program} would read as \
         an option; edit the loop or workflow to give a {key} that starts with another character",
        key = option.key
    )
}

/// An empty cwd means "no cwd", as it does for the original's `spawn`.
fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// The program and arguments an agent target runs: 0.5.11's table (agents
/// note §2.1), then `extraArgs`. The prompt is not among them: it goes on
/// stdin (§2.3).
///
/// ```
/// use loops_core::{AgentProvider, AgentTarget};
/// let target = AgentTarget::new(AgentProvider::Cursor, "fix the build");
/// let (program, args) = loops_exec::agent_argv(&target);
/// assert_eq!(program, "agent");
/// assert_eq!(args, ["-p", "--trust", "--sandbox", "enabled"]);
/// ```
pub fn agent_argv(target: &AgentTarget) -> (&'static str, Vec<String>) {
    use AgentProvider::{Aicopilot, Claude, Codewith, Codex, Cursor, Opencode};
    let safe = target.config_isolation() == ConfigIsolation::Safe;
    let perm = target.permission_mode();
    let sandbox = target.effective_sandbox();
    let cwd = non_empty(target.cwd.as_deref());
    let model = target.model.as_deref();
    let variant = target.variant.as_deref();
    let agent = target.agent.as_deref();
    let mut args: Vec<String> = Vec::new();
    match target.provider {
        Claude => {
            if safe {
                push(
                    &mut args,
                    &[
                        "--safe-mode",
                        "--setting-sources",
                        "local",
                        "--no-session-persistence",
                    ],
                );
            }
            let mode = match perm {
                PermissionMode::Default => None,
                PermissionMode::Plan => Some("plan"),
                PermissionMode::Auto => Some("auto"),
                PermissionMode::Bypass => Some("bypassPermissions"),
            };
            flag(&mut args, "--permission-mode", mode);
            push(&mut args, &["-p", "--output-format", "json"]);
            flag(&mut args, "--model", model);
            flag(&mut args, "--effort", variant);
            flag(&mut args, "--agent", agent);
        }
        Cursor => {
            push(&mut args, &["-p", "--trust"]);
            if perm == PermissionMode::Plan {
                push(&mut args, &["--mode", "plan"]);
            }
            if perm == PermissionMode::Bypass {
                push(&mut args, &["--force"]);
            }
            flag(&mut args, "--sandbox", sandbox);
            flag(&mut args, "--model", model);
            flag(&mut args, "--agent", agent);
        }
        Codewith | Codex => {
            if let Some(variant) = variant {
                let quoted = serde_json::Value::from(variant).to_string();
                push(
                    &mut args,
                    &["-c", &format!("model_reasoning_effort={quoted}")],
                );
            }
            // Network egress is codewith's only (agents note §2.1).
            if target.provider == Codewith && sandbox == Some("workspace-write") {
                push(
                    &mut args,
                    &["-c", "sandbox_workspace_write.network_access=true"],
                );
            }
            // The approval flag is global, so it precedes `exec`.
            push(
                &mut args,
                &[
                    "--ask-for-approval",
                    "never",
                    "exec",
                    "--json",
                    "--ephemeral",
                ],
            );
            flag(&mut args, "--sandbox", sandbox);
            push(&mut args, &["--skip-git-repo-check"]);
            // 0.5.11 gives codewith no `--ignore-rules` (0.3.1 did).
            if safe && target.provider == Codex {
                push(&mut args, &["--ignore-rules"]);
            }
            flag(&mut args, "--cd", cwd);
            for dir in target.add_dirs.iter().flatten() {
                push(&mut args, &["--add-dir", dir.trim()]);
            }
            flag(&mut args, "--model", model);
        }
        Aicopilot | Opencode => {
            push(&mut args, &["run", "--format", "json"]);
            if safe {
                push(&mut args, &["--pure"]);
            }
            if perm == PermissionMode::Bypass {
                push(&mut args, &["--dangerously-skip-permissions"]);
            }
            flag(&mut args, "--dir", cwd);
            flag(&mut args, "--model", model);
            flag(&mut args, "--variant", variant);
            flag(&mut args, "--agent", agent);
        }
    }
    args.extend(target.extra_args.iter().flatten().cloned());
    (target.provider.executable(), args)
}

fn push(args: &mut Vec<String>, words: &[&str]) {
    args.extend(words.iter().map(|w| (*w).to_owned()));
}

/// `name value`, when there is a value.
fn flag(args: &mut Vec<String>, name: &str, value: Option<&str>) {
    if let Some(value) = value {
        push(args, &[name, value]);
    }
}

/// [`ProcessSpec::of`] for tests: the prompt file is read from disk, with
/// no cancel.
#[cfg(test)]
impl<'a> ProcessSpec<'a> {
    pub(crate) fn of_target(target: &'a ProcessTarget) -> ProcessSpec<'a> {
        let reader = crate::prompt_file::file_reader();
        let read = PromptRead {
            cancel: None,
            step: None,
            reader: &reader,
        };
        let timers = loops_core::effective_timers(target, None);
        ProcessSpec::of(target, &read, timers).expect("only a cancel or a hung read interrupts it")
    }
}

#[cfg(test)]
mod tests;
