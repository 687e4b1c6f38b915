//! `loops create command|agent|workflow <name>` (SPEC §7.3).
//!
//! The arguments are resolved and validated before the store is opened, so
//! a rejected create leaves no row behind (SPEC §2.3).
//!
//! Issue 16: a command or agent loop stores its working directory absolute,
//! the current one when `--cwd` is not given (`cwd`), and a create that
//! gives a second loop an existing name warns, since commands given that
//! name then refuse it.

pub(crate) mod cwd;
pub(crate) mod prompt_file;

use anyhow::Result;
use loops_core::{AgentProvider, Loop, NewLoop, Target};
use loops_store::{Store, StoreError};

use crate::args::{CreateAgent, CreateCommand, CreateWorkflow};
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact;
use crate::render::Printer;

/// `create command`.
pub(crate) fn command(ctx: &Context, args: &CreateCommand, out: &mut Printer) -> Result<Outcome> {
    let mut new = crate::resolve::command_loop(ctx, args)?;
    if let Target::Command(target) = &mut new.target {
        target.cwd = Some(cwd::resolve(args.cwd.as_deref())?);
    }
    create(ctx, &new, out)
}

/// `create agent`.
///
/// `--agent` with provider codex is accepted and stored, as the original
/// does, with a warning: codex has no `--agent` flag and never receives it
/// (SPEC §5.2).
pub(crate) fn agent(ctx: &Context, args: &CreateAgent, out: &mut Printer) -> Result<Outcome> {
    let file = match &args.prompt_file {
        Some(path) => Some(prompt_file::read(path)?),
        None => None,
    };
    let mut new = crate::resolve::agent_loop(ctx, args, file)?;
    if let Target::Agent(target) = &mut new.target {
        target.cwd = Some(cwd::resolve(args.cwd.as_deref())?);
    }
    if let Target::Agent(target) = &new.target
        && target.provider == AgentProvider::Codex
        && target.agent.is_some()
    {
        ctx.note(
            "warning",
            "--agent is ignored for provider codex, which has no --agent flag; the agent is \
             stored but codex never receives it",
        );
    }
    create(ctx, &new, out)
}

/// `create workflow`: the loop stores the id `--workflow` resolves to
/// (SPEC §7.3), by id whatever its status, else the newest active workflow
/// of that name.
pub(crate) fn workflow(ctx: &Context, args: &CreateWorkflow, out: &mut Printer) -> Result<Outcome> {
    let mut new = crate::resolve::workflow_loop(ctx, args)?;
    let store = ctx.open_store()?;
    let workflow = store.require_workflow(&args.workflow)?;
    if let Target::Workflow(target) = &mut new.target {
        target.workflow_id = workflow.id;
    }
    let lp = store.create_loop(&new, super::now())?;
    warn_if_name_shared(ctx, &store, &lp);
    if out.json {
        out.json_of(&redact::loop_json(&lp))?;
        return Ok(Outcome::Success);
    }
    out.line(&format!(
        "created workflow loop {} ({}) workflow={} next={}",
        lp.id,
        lp.name,
        workflow.name,
        next_run(&lp)
    ))?;
    crate::hint::no_daemon(ctx, &store, out.json, super::now());
    Ok(Outcome::Success)
}

fn create(ctx: &Context, new: &NewLoop, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let lp = store.create_loop(new, super::now())?;
    print_created(&lp, out)?;
    warn_if_name_shared(ctx, &store, &lp);
    if let Some(dir) = target_cwd(&lp.target) {
        cwd::warn_if_missing(ctx, dir);
    }
    crate::hint::no_daemon(ctx, &store, out.json, super::now());
    Ok(Outcome::Success)
}

/// The working directory of a command or agent target.
pub(crate) fn target_cwd(target: &Target) -> Option<&str> {
    match target {
        Target::Command(t) => t.cwd.as_deref(),
        Target::Agent(t) => t.cwd.as_deref(),
        _ => None,
    }
}

/// Warns on stderr when another loop already had the new loop's name:
/// commands given that name now refuse it (issue 16), so the user learns
/// it here rather than at the next `pause`. Best effort: a failed lookup
/// only skips the warning.
fn warn_if_name_shared(ctx: &Context, store: &Store, lp: &Loop) {
    if let Err(StoreError::AmbiguousName { matches, .. }) = store.require_loop(&lp.name) {
        ctx.warn(&format!(
            "{} loops are now named {:?}; commands given this name refuse it, so use the id \
                 {}, or give one of them another name with `loops rename`",
            matches.len(),
            lp.name,
            lp.id
        ));
    }
}

fn print_created(lp: &Loop, out: &mut Printer) -> std::io::Result<()> {
    if out.json {
        return out.json_of(&redact::loop_json(lp));
    }
    out.line(&format!(
        "created loop {} ({}) next={}",
        lp.id,
        lp.name,
        next_run(lp)
    ))
}

/// The loop's next run, or `-`.
fn next_run(lp: &Loop) -> String {
    lp.next_run_at
        .map_or_else(|| "-".to_owned(), |t| t.to_string())
}
