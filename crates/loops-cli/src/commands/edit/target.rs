//! The target flags of `loops edit`: each applies to one kind of target,
//! and a flag given for another kind is refused, naming the loop's kind
//! and the flags it takes.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow, bail};
use loops_core::{
    Account, AgentProvider, ConfigIsolation, DurationError, Loop, Target, WallClock, WorkflowId,
};

use crate::args::AccountOptions;
use crate::args::edit::EditArgs;
use crate::commands::create::{cwd, prompt_file};
use crate::resolve;
use crate::resolve::agent::{self as agent_options, AgentChange};

const COMMAND_FLAGS: &str = "--cmd, --arg, --no-args, --shell, --no-shell, --env, --no-env, \
                             --cwd, --timeout, --account, --account-tool";
const AGENT_FLAGS: &str = "--provider, --prompt, --prompt-file, --model, --agent, \
                           --config-isolation, --permission-mode, --sandbox, --add-dir, --effort, \
                           --idle-timeout, --allow-tool, --allow-command, --safety-reason, \
                           --[no-]manual-break-glass, --env, --no-env, --cwd, --timeout, \
                           --account, --account-tool";
const WORKFLOW_FLAGS: &str = "--workflow, --timeout";

/// What the target flags name outside the store: a directory and a file,
/// read before the store is opened.
pub(super) struct Outside {
    /// `--cwd`, absolute.
    cwd: Option<String>,
    /// `--prompt-file`: its absolute path and its text now.
    prompt_file: Option<(String, String)>,
}

impl Outside {
    /// Resolves what `args` name outside the store.
    pub(super) fn of(args: &EditArgs) -> Result<Outside> {
        Ok(Outside {
            cwd: args
                .cwd
                .as_deref()
                .map(|d| cwd::resolve(Some(d)))
                .transpose()?,
            prompt_file: args
                .prompt_file
                .as_deref()
                .map(prompt_file::read)
                .transpose()?,
        })
    }
}

/// The target flags, resolved: each field is `None` when its flag is not
/// given, and the stored value then stays. Which flags fit is decided
/// against the stored loop's kind of target.
pub(super) struct TargetChange {
    /// The target flags given, each with the kinds of target it fits.
    given: Vec<(&'static str, &'static [&'static str])>,
    command: Option<String>,
    /// `--arg` (`Some(Some(..))`) or `--no-args` (`Some(None)`).
    args: Option<Option<Vec<String>>>,
    /// `--shell` or `--no-shell`.
    shell: Option<bool>,
    /// `--env` (`Some(Some(..))`) or `--no-env` (`Some(None)`).
    env: Option<Option<BTreeMap<String, String>>>,
    provider: Option<AgentProvider>,
    prompt: Option<String>,
    /// `--prompt-file`: its absolute path and its text now.
    prompt_file: Option<(String, String)>,
    /// `--model`: `Some(None)` (from `''`) removes it.
    model: Option<Option<String>>,
    /// `--agent`: `Some(None)` (from `''`) removes it.
    agent: Option<Option<String>>,
    config_isolation: Option<ConfigIsolation>,
    /// The options 0.5.11 added (issue 27).
    agent_options: AgentChange,
    /// `--cwd`, absolute.
    pub(super) cwd: Option<String>,
    /// `--timeout`, read as far as it goes without the loop's kind.
    timeout: Option<Timeout>,
    /// `--account` and `--account-tool`, merged with the stored account.
    account: Option<String>,
    account_tool: Option<String>,
}

impl TargetChange {
    /// Resolves the target flags of `args`; `outside` is what they name
    /// outside the store.
    pub(super) fn of(args: &EditArgs, outside: Outside) -> Result<TargetChange> {
        let env = if !args.env.is_empty() {
            Some(resolve::env_map(&args.env)?)
        } else {
            args.no_env.then_some(None)
        };
        let provider = args
            .provider
            .as_deref()
            .map(resolve::provider)
            .transpose()?;
        let config_isolation = args
            .config_isolation
            .as_deref()
            .map(resolve::isolation)
            .transpose()?;
        let timeout = args.timeout.as_deref().map(|t| match t {
            "" => Timeout::Default,
            t if agent_options::is_unlimited(t) => Timeout::Unlimited,
            t => match resolve::duration(t, "--timeout") {
                Ok(ms) => Timeout::Ms(ms),
                Err(e) => Timeout::Bad(e),
            },
        });
        let agent_options = AgentChange::of(&args.agent_options.flags(), true, cwd::add_dir)?;
        let set_or_clear =
            |v: &Option<String>| v.as_ref().map(|v| (!v.is_empty()).then(|| v.clone()));
        Ok(TargetChange {
            given: given(args),
            command: args.command.clone(),
            args: if !args.args.is_empty() {
                Some(Some(args.args.clone()))
            } else {
                args.no_args.then_some(None)
            },
            shell: (args.shell || args.no_shell).then_some(args.shell),
            env,
            provider,
            prompt: args.prompt.clone(),
            prompt_file: outside.prompt_file,
            model: set_or_clear(&args.model),
            agent: set_or_clear(&args.agent),
            config_isolation,
            agent_options,
            cwd: outside.cwd,
            timeout,
            account: args.account.clone(),
            account_tool: args.account_tool.clone(),
        })
    }

    /// Applies the flags to `target`, the stored loop's; `workflow` is
    /// `--workflow` found in the store.
    pub(super) fn apply(
        self,
        stored: &Loop,
        workflow: Option<WorkflowId>,
        target: &mut Target,
    ) -> Result<()> {
        let (kind, takes) = match target {
            Target::Command(_) => ("command", COMMAND_FLAGS),
            Target::Agent(_) => ("agent", AGENT_FLAGS),
            Target::Workflow(_) => ("workflow", WORKFLOW_FLAGS),
        };
        let misfits: Vec<&str> = self
            .given
            .iter()
            .filter(|(_, kinds)| !kinds.contains(&kind))
            .map(|(flag, _)| *flag)
            .collect();
        if !misfits.is_empty() {
            bail!(
                "{} {} not apply to {} ({}), a {kind} loop; a {kind} loop takes {takes}",
                misfits.join(", "),
                if misfits.len() == 1 { "does" } else { "do" },
                stored.name,
                stored.id,
            );
        }
        let timeout = self.timeout;
        match target {
            Target::Command(t) => {
                if let Some(command) = self.command {
                    t.command = command;
                }
                if let Some(args) = self.args {
                    t.args = args;
                }
                if let Some(shell) = self.shell {
                    t.shell = Some(shell);
                }
                if let Some(env) = self.env {
                    t.env = env;
                }
                if self.cwd.is_some() {
                    t.cwd = self.cwd;
                }
                match timeout {
                    None => {}
                    Some(Timeout::Default) => t.timeout_ms = None,
                    Some(Timeout::Unlimited) => agent_options::refuse_unlimited("command")?,
                    Some(Timeout::Bad(e)) => return Err(e),
                    // SPEC §9 item 28: a zero timeout would time out at once.
                    Some(Timeout::Ms(0)) => {
                        return Err(DurationError::Zero {
                            what: "--timeout".to_owned(),
                        }
                        .into());
                    }
                    Some(Timeout::Ms(ms)) => t.timeout_ms = Some(ms),
                }
                t.account = account(
                    self.account.as_deref(),
                    self.account_tool.as_deref(),
                    t.account.take(),
                )?;
            }
            Target::Agent(t) => {
                if let Some(provider) = self.provider {
                    t.provider = provider;
                }
                if let Some(prompt) = self.prompt {
                    t.prompt = prompt;
                    // A given prompt replaces a prompt file (issue 17).
                    t.prompt_file = None;
                }
                if let Some((path, text)) = self.prompt_file {
                    // As `create agent --prompt-file`: the path absolute, the
                    // text now stored as the prompt an older loops would run.
                    t.prompt = text;
                    t.prompt_file = Some(path);
                }
                if let Some(model) = self.model {
                    t.model = model;
                }
                if let Some(agent) = self.agent {
                    t.agent = agent;
                }
                if let Some(isolation) = self.config_isolation {
                    t.config_isolation = Some(isolation);
                }
                if let Some(env) = self.env {
                    t.env = env;
                }
                if self.cwd.is_some() {
                    t.cwd = self.cwd;
                }
                match timeout {
                    None => {}
                    Some(Timeout::Default) => t.timeout_ms = WallClock::Unset,
                    Some(Timeout::Unlimited) => t.timeout_ms = WallClock::Unlimited,
                    Some(Timeout::Bad(_) | Timeout::Ms(0)) => {
                        return Err(anyhow!(agent_options::TIMEOUT_MESSAGE));
                    }
                    Some(Timeout::Ms(ms)) => t.timeout_ms = WallClock::Ms(ms),
                }
                // After the wall clock: `--idle-timeout none` depends on it.
                self.agent_options.apply(t);
                t.account = account(
                    self.account.as_deref(),
                    self.account_tool.as_deref(),
                    t.account.take(),
                )?;
            }
            Target::Workflow(t) => {
                if let Some(id) = workflow {
                    t.workflow_id = id;
                }
                match timeout {
                    None => {}
                    Some(Timeout::Default) => t.timeout_ms = None,
                    Some(Timeout::Unlimited) => agent_options::refuse_unlimited("workflow")?,
                    Some(Timeout::Bad(e)) => return Err(e),
                    // SPEC §1.3: 0 means no limit, as in create.
                    Some(Timeout::Ms(ms)) => t.timeout_ms = Some(ms).filter(|ms| *ms > 0),
                }
            }
        }
        Ok(())
    }
}

/// The target flags given, each with the kinds of target it fits.
fn given(args: &EditArgs) -> Vec<(&'static str, &'static [&'static str])> {
    const COMMAND: &[&str] = &["command"];
    const AGENT: &[&str] = &["agent"];
    const WORKFLOW: &[&str] = &["workflow"];
    const PROCESS: &[&str] = &["command", "agent"];
    const ANY: &[&str] = &["command", "agent", "workflow"];
    [
        ("--cmd", args.command.is_some(), COMMAND),
        ("--arg", !args.args.is_empty(), COMMAND),
        ("--no-args", args.no_args, COMMAND),
        ("--shell", args.shell, COMMAND),
        ("--no-shell", args.no_shell, COMMAND),
        ("--env", !args.env.is_empty(), PROCESS),
        ("--no-env", args.no_env, PROCESS),
        ("--provider", args.provider.is_some(), AGENT),
        ("--prompt", args.prompt.is_some(), AGENT),
        ("--prompt-file", args.prompt_file.is_some(), AGENT),
        ("--model", args.model.is_some(), AGENT),
        ("--agent", args.agent.is_some(), AGENT),
        ("--config-isolation", args.config_isolation.is_some(), AGENT),
        ("--workflow", args.workflow.is_some(), WORKFLOW),
        ("--cwd", args.cwd.is_some(), PROCESS),
        ("--timeout", args.timeout.is_some(), ANY),
        ("--account", args.account.is_some(), PROCESS),
        ("--account-tool", args.account_tool.is_some(), PROCESS),
    ]
    .into_iter()
    .filter(|(_, on, _)| *on)
    .map(|(flag, _, kinds)| (flag, kinds))
    .chain(
        args.agent_options
            .flags()
            .given()
            .into_iter()
            .map(|flag| (flag, AGENT)),
    )
    .collect()
}

/// `--timeout`, read without the loop's kind: what it means, and whether
/// it is refused, depend on the kind.
enum Timeout {
    /// `''`: the stored timeout is removed, so the default applies.
    Default,
    /// `none` and its synonyms: an agent's `timeoutMs: null`.
    Unlimited,
    /// A duration (0: a workflow's "no limit", refused otherwise).
    Ms(u64),
    /// Not a duration; an agent loop says so with 0.5.11's message.
    Bad(anyhow::Error),
}

/// `--account`/`--account-tool` over the stored account: `--account ''`
/// removes it, `--account-tool ''` removes only the tool, and a new
/// profile keeps the stored tool unless `--account-tool` is given.
fn account(
    profile: Option<&str>,
    tool: Option<&str>,
    stored: Option<Account>,
) -> Result<Option<Account>> {
    match (profile, tool) {
        (None, None) => Ok(stored),
        (Some(""), None) => Ok(None),
        (Some(""), Some(_)) => {
            bail!("--account-tool cannot be set while --account '' removes the account")
        }
        (Some(profile), tool) => {
            let tool = match tool {
                Some(tool) => Some(tool.to_owned()),
                None => stored.and_then(|a| a.tool),
            };
            resolve::account(&AccountOptions {
                account: Some(profile.to_owned()),
                account_tool: tool.filter(|t| !t.is_empty()),
            })
        }
        (None, Some(tool)) => match stored {
            Some(account) => Ok(Some(Account {
                profile: account.profile,
                tool: (!tool.is_empty()).then(|| tool.to_owned()),
            })),
            None => resolve::account(&AccountOptions {
                account: None,
                account_tool: Some(tool.to_owned()),
            }),
        },
    }
}
