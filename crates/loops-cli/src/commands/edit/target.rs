//! The target flags of `loops edit`: each applies to one kind of target,
//! and a flag given for another kind is refused, naming the loop's kind
//! and the flags it takes.

use anyhow::{Result, bail};
use loops_core::{Account, Loop, Target, WorkflowId};

use crate::args::AccountOptions;
use crate::args::edit::EditArgs;
use crate::commands::create::cwd;
use crate::context::Context;
use crate::resolve;

const COMMAND_FLAGS: &str = "--cmd, --arg, --no-args, --shell, --no-shell, --env, --no-env, \
                             --cwd, --timeout, --account, --account-tool";
const AGENT_FLAGS: &str = "--provider, --prompt, --prompt-file, --model, --agent, --config-isolation, --cwd, \
                           --timeout, --account, --account-tool";
const WORKFLOW_FLAGS: &str = "--workflow, --timeout";

/// What the target flags name outside the store, found before the loop is
/// locked: a file or directory that blocks (a FIFO, a slow mount) must not
/// hold the write lock the daemon's claims wait on.
pub(super) struct Outside {
    /// `--workflow`, resolved: by id whatever its status, else the active
    /// workflow of that name, as create does.
    pub(super) workflow: Option<WorkflowId>,
    /// `--cwd`, absolute.
    pub(super) cwd: Option<String>,
    /// `--prompt-file`: its absolute path and its text now.
    pub(super) prompt_file: Option<(String, String)>,
}

impl Outside {
    /// Resolves what `args` name outside the store.
    pub(super) fn of(args: &EditArgs, workflow: Option<WorkflowId>) -> Result<Outside> {
        Ok(Outside {
            workflow,
            cwd: args
                .cwd
                .as_deref()
                .map(|d| cwd::resolve(Some(d)))
                .transpose()?,
            prompt_file: args
                .prompt_file
                .as_deref()
                .map(crate::commands::create::prompt_file::read)
                .transpose()?,
        })
    }
}

/// Applies the target flags of `args` to `target`, the stored loop's.
pub(super) fn apply(
    ctx: &Context,
    args: &EditArgs,
    outside: &Outside,
    stored: &Loop,
    target: &mut Target,
) -> Result<()> {
    let workflow = outside.workflow;
    let (kind, takes) = match target {
        Target::Command(_) => ("command", COMMAND_FLAGS),
        Target::Agent(_) => ("agent", AGENT_FLAGS),
        Target::Workflow(_) => ("workflow", WORKFLOW_FLAGS),
    };
    let misfits: Vec<&str> = given(args)
        .into_iter()
        .filter(|(_, kinds)| !kinds.contains(&kind))
        .map(|(flag, _)| flag)
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
    let cwd = outside.cwd.clone();
    match target {
        Target::Command(t) => {
            if let Some(command) = &args.command {
                t.command = command.clone();
            }
            if !args.args.is_empty() {
                t.args = Some(args.args.clone());
            } else if args.no_args {
                t.args = None;
            }
            if args.shell || args.no_shell {
                t.shell = Some(args.shell);
            }
            if !args.env.is_empty() {
                t.env = resolve::env_map(&args.env)?;
            } else if args.no_env {
                t.env = None;
            }
            if cwd.is_some() {
                t.cwd = cwd;
            }
            if let Some(timeout) = &args.timeout {
                t.timeout_ms = Some(resolve::positive_duration(ctx, timeout, "--timeout")?);
            }
            t.account = account(args, t.account.take())?;
        }
        Target::Agent(t) => {
            if let Some(provider) = &args.provider {
                t.provider = resolve::provider(provider)?;
            }
            if let Some(prompt) = &args.prompt {
                t.prompt = prompt.clone();
                // A given prompt replaces a prompt file (issue 17).
                t.prompt_file = None;
            }
            if let Some((path, text)) = &outside.prompt_file {
                // As `create agent --prompt-file`: the path absolute, the
                // text now stored as the prompt an older loops would run.
                t.prompt = text.clone();
                t.prompt_file = Some(path.clone());
            }
            if let Some(model) = &args.model {
                t.model = (!model.is_empty()).then(|| model.clone());
            }
            if let Some(agent) = &args.agent {
                t.agent = (!agent.is_empty()).then(|| agent.clone());
            }
            if let Some(isolation) = &args.config_isolation {
                t.config_isolation = Some(resolve::isolation(isolation)?);
            }
            if cwd.is_some() {
                t.cwd = cwd;
            }
            if let Some(timeout) = &args.timeout {
                t.timeout_ms = Some(resolve::positive_duration(ctx, timeout, "--timeout")?);
            }
            t.account = account(args, t.account.take())?;
        }
        Target::Workflow(t) => {
            if let Some(id) = workflow {
                t.workflow_id = id;
            }
            if let Some(timeout) = &args.timeout {
                // SPEC §1.3: 0 means no limit, as in create.
                t.timeout_ms =
                    Some(resolve::duration(ctx, timeout, "--timeout")?).filter(|ms| *ms > 0);
            }
        }
    }
    Ok(())
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
        ("--env", !args.env.is_empty(), COMMAND),
        ("--no-env", args.no_env, COMMAND),
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
    .collect()
}

/// `--account`/`--account-tool` over the stored account: `--account ''`
/// removes it, `--account-tool ''` removes only the tool, and a new
/// profile keeps the stored tool unless `--account-tool` is given.
fn account(args: &EditArgs, stored: Option<Account>) -> Result<Option<Account>> {
    match (args.account.as_deref(), args.account_tool.as_deref()) {
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
