//! The MCP tools: names (later OpenLoops'), descriptions, schemas, and how
//! each one's arguments become the typed request of a CLI command.
//!
//! A request is built from the arguments directly, never a command line:
//! no value a client sends is parsed as a flag, whatever it starts with,
//! and what a tool leaves out takes the command line's default (the
//! `DEFAULT_*` constants of `args`).

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub(crate) use super::options::loop_options;
use super::params::{
    ApplyParams, Count, CreateCommandParams, CreateWorkflowParams, Duration, LabelsParams,
    ListParams, LoopParams, NoParams, RunInspectParams, RunNowParams, RunsParams, ShowParams,
    ValidateParams, WorkflowParams, WorkflowsListParams,
};
use super::{ALLOW_MUTATIONS, Access};
use crate::app::Captured;
use crate::args::daemon::{Daemon, DoctorArgs};
use crate::args::policy::{LabelsArgs, LabelsCommand};
use crate::args::workflow::{self, Workflows};
use crate::args::{self, AccountOptions, Command, Create, LoopRef};
use crate::context::Context;

/// One tool.
pub(crate) struct ToolDef {
    /// Its name.
    pub(crate) name: &'static str,
    /// What it does, in a sentence or two.
    pub(super) description: &'static str,
    /// Whether it changes loops (refused without [`ALLOW_MUTATIONS`]).
    pub(crate) mutation: bool,
    /// Its input schema.
    pub(super) schema: fn() -> Arc<JsonObject>,
    /// Carries out a call: the arguments, and what the server allows.
    pub(super) call: fn(&Context, &JsonObject, Access) -> Result<Captured>,
}

/// The tools, in the order `tools/list` gives them.
pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "loops_list",
        description: "List loops with their schedule, status and next run (loops list --json). \
                      Tokens and webhook URLs in commands and hooks are masked unless showOutput \
                      is allowed.",
        mutation: false,
        schema: schema::<ListParams>,
        call: list,
    },
    ToolDef {
        name: "loops_show",
        description: "Show one loop by id or name (loops show). Tokens and webhook URLs in its \
                      command and hooks are masked unless showOutput is allowed.",
        mutation: false,
        schema: schema::<ShowParams>,
        call: show,
    },
    ToolDef {
        name: "loops_runs",
        description: "List recorded runs, newest first, of every loop or one (loops runs --json). \
                      Output is shown only as lengths unless showOutput is allowed.",
        mutation: false,
        schema: schema::<RunsParams>,
        call: runs,
    },
    super::health::TOOL,
    ToolDef {
        name: "loops_doctor",
        description: "Check the data directory, PATH, accounts, providers and daemon (loops doctor --json); \
                      runs `accounts` and each active loop's preflight, as the CLI does.",
        mutation: false,
        schema: schema::<NoParams>,
        call: doctor,
    },
    ToolDef {
        name: "loops_daemon_status",
        description: "Whether the daemon runs, its lease, and loop and run counts (loops daemon status --json).",
        mutation: false,
        schema: schema::<NoParams>,
        call: daemon_status,
    },
    ToolDef {
        name: "loops_workflows_list",
        description: "List stored workflows (loops workflows list --json). Tokens and webhook \
                      URLs in their steps are masked unless showOutput is allowed.",
        mutation: false,
        schema: schema::<WorkflowsListParams>,
        call: workflows_list,
    },
    ToolDef {
        name: "loops_workflow_read",
        description: "Show one stored workflow with its steps (loops workflows show). Tokens and \
                      webhook URLs in its steps are masked unless showOutput is allowed.",
        mutation: false,
        schema: schema::<WorkflowParams>,
        call: workflow_read,
    },
    ToolDef {
        name: "loops_workflow_run_inspect",
        description: "Show one workflow run with its steps and events (loops workflows inspect --json).",
        mutation: false,
        schema: schema::<RunInspectParams>,
        call: workflow_run_inspect,
    },
    ToolDef {
        name: "loops_workflow_validate",
        description: "Check a workflow without storing it (loops workflows validate --json). \
                      preflight and promptFile read or run local programs and files, so they \
                      need LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: false,
        schema: schema::<ValidateParams>,
        call: workflow_validate,
    },
    ToolDef {
        name: "loops_create_command",
        description: "Create a loop that runs a command (loops create command). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<CreateCommandParams>,
        call: create_command,
    },
    ToolDef {
        name: "loops_create_workflow",
        description: "Create a loop that runs a stored workflow (loops create workflow). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<CreateWorkflowParams>,
        call: create_workflow,
    },
    ToolDef {
        name: "loops_pause",
        description: "Pause an active loop; its next run is kept (loops pause). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<LoopParams>,
        call: pause,
    },
    ToolDef {
        name: "loops_resume",
        description: "Put a paused or stopped loop back on its schedule (loops resume). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<LoopParams>,
        call: resume,
    },
    ToolDef {
        name: "loops_stop",
        description: "Stop a loop and clear its next run (loops stop). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<LoopParams>,
        call: super::cancel::stop,
    },
    super::cancel::TOOL,
    ToolDef {
        name: "loops_run_now",
        description: "Run a loop now, wait for it, and return the finished run (loops run-now --json). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<RunNowParams>,
        call: run_now,
    },
    ToolDef {
        name: "loops_apply",
        description: "Make the loops a loops file describes exist: create, update, and with \
                      prune remove; returns the plan (loops apply --json). Reads the file on \
                      the server's host. Needs LOOPS_MCP_ALLOW_MUTATIONS=true, a dry run too.",
        mutation: true,
        schema: schema::<ApplyParams>,
        call: apply,
    },
    ToolDef {
        name: "loops_labels_update",
        description: "Set, add, remove or clear a loop's labels (loops labels). \
                      Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
        mutation: true,
        schema: schema::<LabelsParams>,
        call: labels_update,
    },
];

/// The tool called `name`.
pub(crate) fn find(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name)
}

/// A tool as `tools/list` describes it.
pub(crate) fn listed(tool: &ToolDef) -> Tool {
    let annotations = if tool.mutation {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(tool.name != "loops_run_now" && !tool.name.starts_with("loops_create"))
            .open_world(tool.name == "loops_run_now")
    } else {
        // doctor runs programs the stored loops name (accounts, preflight).
        ToolAnnotations::new()
            .read_only(true)
            .open_world(tool.name == "loops_doctor")
    };
    Tool::new(tool.name, tool.description, (tool.schema)()).annotate(annotations)
}

/// Carries out a call of `tool`: refused mutations and arguments the
/// schema does not know are errors before anything runs. Secrets shaped
/// like tokens are masked in what it returns ([`super::mask`]), unless a
/// server that allows mutations is asked for them with `showOutput`.
pub(crate) fn call(
    ctx: &Context,
    tool: &ToolDef,
    args: &JsonObject,
    access: Access,
) -> Result<Captured> {
    if tool.mutation && access == Access::ReadOnly {
        bail!(
            "{} changes loops, and this server was started without {ALLOW_MUTATIONS}=true; \
             set it in the environment of loops mcp to allow changes",
            tool.name
        );
    }
    let schema = (tool.schema)();
    let known = schema.get("properties").and_then(Value::as_object);
    for key in args.keys() {
        if !known.is_some_and(|known| known.contains_key(key)) {
            let names: Vec<&str> = known
                .map(|k| k.keys().map(String::as_str).collect())
                .unwrap_or_default();
            bail!(
                "{} has no argument {key:?}; its arguments are: {}",
                tool.name,
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        }
    }
    let mut captured = (tool.call)(ctx, args, access)?;
    let shown = access == Access::Mutations && args.get("showOutput") == Some(&Value::Bool(true));
    if !shown {
        super::mask::mask(&mut captured);
    }
    Ok(captured)
}

/// The input schema of `P`, the arguments' type.
pub(crate) fn schema<P: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_input::<P>()
        .unwrap_or_else(|_| rmcp::handler::server::common::schema_for_empty_input())
}

/// Reads a call's arguments into `P`.
pub(crate) fn parse<P: DeserializeOwned>(name: &str, args: &JsonObject) -> Result<P> {
    serde_json::from_value(Value::Object(args.clone()))
        .map_err(|e| anyhow!("invalid arguments for {name}: {e}"))
}

/// Refuses `showOutput` without mutations allowed: output, commands and
/// hooks may hold secrets.
fn output_allowed(show_output: bool, access: Access) -> Result<()> {
    if show_output && access == Access::ReadOnly {
        bail!(
            "showOutput shows run output and the tokens and webhook URLs written into commands \
             and hooks, which are secrets, and needs {ALLOW_MUTATIONS}=true in the environment of \
             loops mcp; without it, output is shown as its length and secrets are masked"
        );
    }
    Ok(())
}

pub(super) fn count(value: Option<Count>) -> Option<String> {
    value.map(|c| c.0)
}

pub(super) fn duration(value: Option<Duration>) -> Option<String> {
    value.map(|d| d.0)
}

/// Runs `request`, keeping its document and warnings.
pub(super) fn run(ctx: &Context, request: Command) -> Result<Captured> {
    Ok(crate::app::run_request(ctx, request))
}

fn list(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: ListParams = parse("loops_list", args)?;
    output_allowed(p.show_output, access)?;
    run(
        ctx,
        Command::List(args::ListArgs {
            status: p.status,
            limit: count(p.limit),
            offset: None,
            labels: p.label.0,
        }),
    )
}

pub(super) fn one_loop(tool: &str, args: &JsonObject) -> Result<LoopRef> {
    let p: LoopParams = parse(tool, args)?;
    Ok(LoopRef { target: p.target })
}

fn show(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: ShowParams = parse("loops_show", args)?;
    output_allowed(p.show_output, access)?;
    run(ctx, Command::Show(LoopRef { target: p.target }))
}

fn runs(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: RunsParams = parse("loops_runs", args)?;
    output_allowed(p.show_output, access)?;
    run(
        ctx,
        Command::Runs(args::RunsArgs {
            target: p.target,
            limit: count(p.limit).unwrap_or_else(|| args::DEFAULT_RUNS_LIMIT.to_owned()),
            offset: None,
            status: p.status,
            show_output: p.show_output,
            labels: p.label.0,
        }),
    )
}

fn doctor(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let NoParams {} = parse("loops_doctor", args)?;
    run(ctx, Command::Doctor(DoctorArgs {}))
}

fn daemon_status(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let NoParams {} = parse("loops_daemon_status", args)?;
    run(ctx, Command::Daemon(Daemon::Status))
}

fn workflows_list(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: WorkflowsListParams = parse("loops_workflows_list", args)?;
    output_allowed(p.show_output, access)?;
    run(
        ctx,
        Command::Workflows(Workflows::List(workflow::ListArgs {
            status: p
                .status
                .unwrap_or_else(|| workflow::DEFAULT_LIST_STATUS.to_owned()),
            limit: count(p.limit),
        })),
    )
}

fn workflow_read(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: WorkflowParams = parse("loops_workflow_read", args)?;
    output_allowed(p.show_output, access)?;
    run(
        ctx,
        Command::Workflows(Workflows::Show(workflow::WorkflowRef {
            target: p.workflow,
        })),
    )
}

fn workflow_run_inspect(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: RunInspectParams = parse("loops_workflow_run_inspect", args)?;
    output_allowed(p.show_output, access)?;
    run(
        ctx,
        Command::Workflows(Workflows::Inspect(workflow::InspectArgs {
            run: workflow::RunRef { run: p.run_id },
            show_output: p.show_output,
        })),
    )
}

fn workflow_validate(ctx: &Context, args: &JsonObject, access: Access) -> Result<Captured> {
    let p: ValidateParams = parse("loops_workflow_validate", args)?;
    if p.preflight && access == Access::ReadOnly {
        bail!(
            "preflight runs local programs (which, accounts env) and needs {ALLOW_MUTATIONS}=true \
             in the environment of loops mcp"
        );
    }
    let text = match p.workflow {
        Value::String(text) => text,
        object @ Value::Object(_) => object.to_string(),
        _ => bail!("workflow must be the workflow as a JSON object, or that object as JSON text"),
    };
    Ok(crate::app::capture(ctx, |ctx, out| {
        crate::commands::workflows::validate_text(
            ctx,
            &text,
            p.name.as_deref(),
            p.preflight,
            || match access {
                Access::Mutations => std::env::current_dir().map_err(|e| {
                    anyhow!("reading the current directory, to resolve promptFile paths: {e}")
                }),
                Access::ReadOnly => Err(anyhow!(
                    "promptFile reads a file on this host and needs {ALLOW_MUTATIONS}=true in the \
                     environment of loops mcp; give the step a prompt instead"
                )),
            },
            out,
        )
    }))
}

/// The request of `loops_create_command`.
pub(crate) fn create_command_request(p: CreateCommandParams) -> Result<Command> {
    // `--env NAME=value` cannot carry such a name: `A=B` would come back
    // as `A` with the value `B=value`. The message is create's, which
    // names `--env` (`resolve::checked`).
    for name in p.env.keys().filter(|n| n.is_empty() || n.contains('=')) {
        if let Err(e) = loops_core::validate_env_name(name, "target") {
            let rest = e.message.strip_prefix("target.env").unwrap_or(&e.message);
            bail!("--env{rest}");
        }
    }
    Ok(Command::Create(Create::Command(args::CreateCommand {
        options: loop_options(p.options)?,
        command: p.cmd,
        args: p.arg,
        no_shell: p.no_shell,
        cwd: p.cwd,
        env: p.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        timeout: duration(p.timeout),
        account: AccountOptions {
            account: p.account,
            account_tool: p.account_tool,
        },
    })))
}

fn create_command(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let p: CreateCommandParams = parse("loops_create_command", args)?;
    run(ctx, create_command_request(p)?)
}

fn create_workflow(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let p: CreateWorkflowParams = parse("loops_create_workflow", args)?;
    run(
        ctx,
        Command::Create(Create::Workflow(args::CreateWorkflow {
            options: loop_options(p.options)?,
            workflow: p.workflow,
            timeout: duration(p.timeout),
        })),
    )
}

fn pause(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    run(ctx, Command::Pause(one_loop("loops_pause", args)?))
}

fn resume(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    run(ctx, Command::Resume(one_loop("loops_resume", args)?))
}

fn run_now(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let p: RunNowParams = parse("loops_run_now", args)?;
    // Allowed to run loops is allowed to see their output.
    run(
        ctx,
        Command::RunNow(args::RunNowArgs {
            target: LoopRef { target: p.target },
            show_output: p.show_output,
            anywhere: p.anywhere,
            ignore_pool: p.ignore_pool,
        }),
    )
}

fn apply(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let p: ApplyParams = parse("loops_apply", args)?;
    run(ctx, apply_request(p))
}

/// The request of `loops_apply` and of `POST /api/v1/apply`.
pub(crate) fn apply_request(p: ApplyParams) -> Command {
    Command::Apply(args::apply::ApplyArgs {
        path: p.path,
        dry_run: p.dry_run,
        prune: p.prune,
        yes: p.yes,
        adopt: p.adopt,
        scope: p.scope,
    })
}

fn labels_update(ctx: &Context, args: &JsonObject, _: Access) -> Result<Captured> {
    let p: LabelsParams = parse("loops_labels_update", args)?;
    run(ctx, labels_request(p)?)
}

/// The request of `loops_labels_update`.
fn labels_request(p: LabelsParams) -> Result<Command> {
    let action = p.action.trim();
    if !["set", "add", "remove", "clear"].contains(&action) {
        bail!(
            "action must be set, add, remove or clear, not {:?}",
            p.action
        );
    }
    if action == "clear" && !p.labels.0.is_empty() {
        bail!("clear removes every label; give no labels with it");
    }
    if action != "clear" && p.labels.0.is_empty() {
        bail!("{action} needs labels: give them in labels");
    }
    let labels = LabelsArgs {
        target: p.target.clone(),
        labels: p.labels.0,
    };
    Ok(Command::Labels(match action {
        "set" => LabelsCommand::Set(labels),
        "add" => LabelsCommand::Add(labels),
        "remove" => LabelsCommand::Remove(labels),
        _ => LabelsCommand::Clear(LoopRef { target: p.target }),
    }))
}

#[cfg(test)]
mod tests;
