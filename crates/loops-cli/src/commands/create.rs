//! `loops create command|agent|workflow <name>` (SPEC §7.3).
//!
//! The arguments are resolved and validated before the store is opened, so
//! a rejected create leaves no row behind (SPEC §2.3).
//!
//! Issue 16: a command or agent loop stores its working directory absolute,
//! the current one when `--cwd` is not given (`cwd`), and a create that
//! gives a second loop an existing name warns, since commands given that
//! name then refuse it.
//!
//! Issue 28: an agent loop whose provider program is not on the PATH warns
//! at once, rather than at its first run.

pub(crate) mod cwd;
pub(crate) mod prompt_file;

use anyhow::Result;
use loops_core::{CommandTarget, Loop, NewLoop, ProcessTarget, Target};
use loops_exec::{ExecError, ExecOptions, RunMetadata, preflight_target};
use loops_store::{Store, StoreError};

use super::now;
use crate::args;
use crate::context::Context;
use crate::exit::Outcome;
use crate::hint;
use crate::redact;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// `create command`.
pub(crate) fn command(
    ctx: &Context,
    args: &args::CreateCommand,
    out: &mut Printer,
) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        let mut new = resolve::command_loop(warnings, args)?;
        if let Target::Command(target) = &mut new.target {
            target.cwd = Some(cwd::resolve(args.cwd.as_deref())?);
        }
        Ok(CreateLoop { new })
    })
}

/// `create agent`.
pub(crate) fn agent(ctx: &Context, args: &args::CreateAgent, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        let file = match &args.prompt_file {
            Some(path) => Some(prompt_file::read(path)?),
            None => None,
        };
        let mut new = resolve::agent_loop(warnings, args, file, cwd::add_dir)?;
        if let Target::Agent(target) = &mut new.target {
            target.cwd = Some(cwd::resolve(args.cwd.as_deref())?);
        }
        Ok(CreateLoop { new })
    })
}

/// `create workflow`: the loop stores the id `--workflow` resolves to
/// (SPEC §7.3), by id whatever its status, else the newest active workflow
/// of that name.
pub(crate) fn workflow(
    ctx: &Context,
    args: &args::CreateWorkflow,
    out: &mut Printer,
) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        Ok(CreateWorkflow {
            new: resolve::workflow_loop(warnings, args)?,
            workflow: args.workflow.clone(),
        })
    })
}

/// The typed request of `create command` and `create agent`: the
/// validated loop, its working directory (and an agent's prompt file)
/// absolute, the file's text as an agent's prompt.
struct CreateLoop {
    new: NewLoop,
}

/// The typed request of `create workflow`: the validated loop, whose
/// target names no workflow yet, and the workflow by id or name.
struct CreateWorkflow {
    new: NewLoop,
    workflow: String,
}

/// What `create` returns: the loop created, the name of its workflow (a
/// workflow loop's), and the store, for the daemon hint.
struct Created {
    lp: Loop,
    workflow: Option<String>,
    store: Store,
}

impl Request for CreateLoop {
    type Document = Created;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Created> {
        let store = ctx.open_store()?;
        let lp = store.create_loop(&self.new, now())?;
        warn_if_name_shared(warnings, &store, &lp);
        if let Some(dir) = target_cwd(&lp.target) {
            cwd::warn_if_missing(warnings, dir);
        }
        warn_if_provider_missing(warnings, &lp.target);
        Ok(Created {
            lp,
            workflow: None,
            store,
        })
    }
}

impl Request for CreateWorkflow {
    type Document = Created;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Created> {
        let mut new = self.new;
        let store = ctx.open_store()?;
        let workflow = store.require_workflow(&self.workflow)?;
        if let Target::Workflow(target) = &mut new.target {
            target.workflow_id = workflow.id;
        }
        let lp = store.create_loop(&new, now())?;
        warn_if_name_shared(warnings, &store, &lp);
        Ok(Created {
            lp,
            workflow: Some(workflow.name),
            store,
        })
    }
}

impl Document for Created {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&redact::loop_json(&self.lp))?)
    }

    /// `created loop <id> (<name>) next=<nextRunAt>`, with the workflow's
    /// name for a workflow loop, then the daemon hint.
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let lp = &self.lp;
        out.line(&match &self.workflow {
            Some(workflow) => format!(
                "created workflow loop {} ({}) workflow={workflow} next={}",
                lp.id,
                lp.name,
                next_run(lp)
            ),
            None => format!("created loop {} ({}) next={}", lp.id, lp.name, next_run(lp)),
        })?;
        hint::no_daemon(ctx, &self.store, now());
        Ok(())
    }
}

/// The working directory of a command or agent target.
pub(crate) fn target_cwd(target: &Target) -> Option<&str> {
    match target {
        Target::Command(t) => t.cwd.as_deref(),
        Target::Agent(t) => t.cwd.as_deref(),
        _ => None,
    }
}

/// Warns when another loop already had the new loop's name, at `create`
/// and at `rename` (issue 28): commands given that name now refuse it
/// (issue 16), so the user learns it here rather than at the next `pause`.
/// Best effort: a failed lookup only skips the warning.
pub(super) fn warn_if_name_shared(warnings: &mut Warnings, store: &Store, lp: &Loop) {
    if let Err(StoreError::AmbiguousName { matches, .. }) = store.require_loop(&lp.name) {
        warnings.push(format!(
            "{} loops are now named {:?}; commands given this name refuse it, so use the id \
                 {}, or give one of them another name with `loops rename`",
            matches.len(),
            lp.name,
            lp.id
        ));
    }
}

/// Warns when an agent loop's provider program is not on the PATH its runs
/// get, as `doctor` checks it: the run would fail with "Executable not
/// found". Only the program is looked up; nothing runs (an account's
/// `accounts env` is left to the run).
fn warn_if_provider_missing(warnings: &mut Warnings, target: &Target) {
    let Target::Agent(agent) = target else {
        return;
    };
    let program = agent.provider.binary();
    let probe = ProcessTarget::Command(CommandTarget::new(program));
    if let Err(ExecError::ExecutableNotFound { .. }) =
        preflight_target(&probe, &RunMetadata::default(), &ExecOptions::default())
    {
        warnings.push(format!(
            "provider {} runs {program}, which is not on the PATH; install it, or its runs \
             will fail with \"Executable not found\"",
            agent.provider.as_str()
        ));
    }
}

/// The loop's next run, or `-`.
fn next_run(lp: &Loop) -> String {
    lp.next_run_at
        .map_or_else(|| "-".to_owned(), |t| t.to_string())
}
