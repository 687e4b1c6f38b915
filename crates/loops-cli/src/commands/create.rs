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
//! Issue 28: `--dry-run` validates as create does and prints the loop it
//! would store and its next 3 fire times, writing nothing: no data
//! directory or database is created. The name check and a workflow's
//! lookup read a database that already exists (`open_existing_store`);
//! without one there is no loop to share the name and no workflow.
//!
//! Issue 28: an agent loop whose provider program is not on the PATH warns
//! at once, rather than at its first run.

pub(crate) mod cwd;
pub(crate) mod prompt_file;

use anyhow::{Result, bail};
use loops_core::{CommandTarget, Loop, NewLoop, ProcessTarget, Target, Timestamp};
use loops_exec::{ExecError, ExecOptions, RunMetadata, preflight_target};
use loops_store::{Store, StoreError};
use serde_json::Value;

use super::now;
use crate::args;
use crate::context::Context;
use crate::exit::Outcome;
use crate::hint;
use crate::redact;
use crate::render::{self, Printer};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// `create command`.
pub(crate) fn command(
    ctx: &Context,
    args: &args::CreateCommand,
    out: &mut Printer,
) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        Ok(CreateLoop {
            new: command_loop(warnings, args)?,
            dry_run: args.options.dry_run,
        })
    })
}

/// The loop `create command` (and `apply`) makes of `args`, validated,
/// its working directory absolute.
pub(crate) fn command_loop(
    warnings: &mut request::Warnings,
    args: &args::CreateCommand,
) -> Result<NewLoop> {
    let mut new = resolve::command_loop(warnings, args)?;
    if let Target::Command(target) = &mut new.target {
        target.cwd = Some(cwd::resolve(args.cwd.as_deref())?);
    }
    Ok(new)
}

/// The loop `create agent` (and `apply`) makes of `args`, validated, its
/// prompt file read and its working directory absolute.
pub(crate) fn agent_loop(
    warnings: &mut request::Warnings,
    args: &args::CreateAgent,
) -> Result<NewLoop> {
    let file = match &args.prompt_file {
        Some(path) => Some(prompt_file::read(path)?),
        None => None,
    };
    let mut new = resolve::agent_loop(warnings, args, file, cwd::add_dir)?;
    if let Target::Agent(target) = &mut new.target {
        target.cwd = Some(cwd::resolve(args.cwd.as_deref())?);
    }
    Ok(new)
}

/// `create agent`.
pub(crate) fn agent(ctx: &Context, args: &args::CreateAgent, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        Ok(CreateLoop {
            new: agent_loop(warnings, args)?,
            dry_run: args.options.dry_run,
        })
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
            dry_run: args.options.dry_run,
        })
    })
}

/// The typed request of `create command` and `create agent`: the
/// validated loop, its working directory (and an agent's prompt file)
/// absolute, the file's text as an agent's prompt.
struct CreateLoop {
    new: NewLoop,
    dry_run: bool,
}

/// The typed request of `create workflow`: the validated loop, whose
/// target names no workflow yet, and the workflow by id or name.
struct CreateWorkflow {
    new: NewLoop,
    workflow: String,
    dry_run: bool,
}

/// How many fire times `--dry-run` lists.
const DRY_RUN_TIMES: usize = 3;

/// What `create` returns: the loop created (or that a dry run would
/// create), the name of its workflow (a workflow loop's), and how it was
/// made.
struct Created {
    lp: Loop,
    workflow: Option<String>,
    made: Made,
}

/// Whether `create` stored the loop.
enum Made {
    /// Stored; the store is kept for the daemon hint.
    Stored(Store),
    /// A dry run: nothing stored; the loop's next fire times.
    DryRun(Vec<Timestamp>),
}

impl Request for CreateLoop {
    type Document = Created;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Created> {
        if self.dry_run {
            let lp = loops_store::loop_to_create(&self.new, now())?;
            let store = ctx.open_existing_store()?;
            super::pools::require_pool(store.as_ref(), lp.policy.pool.as_deref())?;
            if let Some(store) = store {
                warn_if_name_taken(warnings, &store, &lp);
            }
            if let Some(dir) = target_cwd(&lp.target) {
                cwd::warn_if_missing(warnings, dir);
            }
            return dry_run(lp, None);
        }
        let store = ctx.open_store()?;
        let mut new = self.new;
        super::pools::require_pool(Some(&store), new.policy.pool.as_deref())?;
        crate::resolve::policy::resolve_after(&store, &mut new.policy.after, None)?;
        let lp = store.create_loop(&new, now())?;
        warn_if_name_shared(warnings, &store, &lp);
        warn_if_watch_missing(warnings, &lp);
        if let Some(dir) = target_cwd(&lp.target) {
            cwd::warn_if_missing(warnings, dir);
        }
        warn_if_provider_missing(warnings, &lp.target);
        Ok(Created {
            lp,
            workflow: None,
            made: Made::Stored(store),
        })
    }
}

impl Request for CreateWorkflow {
    type Document = Created;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Created> {
        let mut new = self.new;
        let store = match self.dry_run {
            true => match ctx.open_existing_store()? {
                Some(store) => store,
                // As the store says it; without a database there is none.
                None => bail!("workflow not found: {}", self.workflow),
            },
            false => ctx.open_store()?,
        };
        super::pools::require_pool(Some(&store), new.policy.pool.as_deref())?;
        let workflow = store.require_workflow(&self.workflow)?;
        super::pools::refuse_shared_pool(new.policy.pool.as_deref(), &workflow)?;
        if let Target::Workflow(target) = &mut new.target {
            target.workflow_id = workflow.id;
        }
        if self.dry_run {
            let lp = loops_store::loop_to_create(&new, now())?;
            warn_if_name_taken(warnings, &store, &lp);
            return dry_run(lp, Some(workflow.name));
        }
        crate::resolve::policy::resolve_after(&store, &mut new.policy.after, None)?;
        let lp = store.create_loop(&new, now())?;
        warn_if_name_shared(warnings, &store, &lp);
        warn_if_watch_missing(warnings, &lp);
        Ok(Created {
            lp,
            workflow: Some(workflow.name),
            made: Made::Stored(store),
        })
    }
}

/// What a dry run returns: `lp` and its next fire times.
fn dry_run(lp: Loop, workflow: Option<String>) -> Result<Created> {
    let times = super::next::loop_times(&lp, lp.created_at, DRY_RUN_TIMES)?;
    Ok(Created {
        lp,
        workflow,
        made: Made::DryRun(times),
    })
}

impl Document for Created {
    /// The loop; a dry run's also has `dryRun: true` and `nextTimes`.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let Made::DryRun(times) = &self.made else {
            return Ok(out.json_of(&redact::loop_json(&self.lp))?);
        };
        let mut doc = serde_json::to_value(redact::loop_json(&self.lp))?;
        if let Value::Object(map) = &mut doc {
            map.insert("dryRun".to_owned(), Value::Bool(true));
            map.insert("nextTimes".to_owned(), serde_json::to_value(times)?);
        }
        Ok(out.json(&doc)?)
    }

    /// `created loop <id> (<name>) next=<nextRunAt>`, with the workflow's
    /// name for a workflow loop, then the daemon hint; for a dry run, the
    /// loop's target, schedule and next fire times.
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let lp = &self.lp;
        let store = match &self.made {
            Made::Stored(store) => store,
            Made::DryRun(times) => return self.human_dry_run(times, out),
        };
        out.line(&match &self.workflow {
            Some(workflow) => format!(
                "created workflow loop {} ({}) workflow={workflow} next={}",
                lp.id,
                lp.name,
                next_run(lp)
            ),
            None => format!("created loop {} ({}) next={}", lp.id, lp.name, next_run(lp)),
        })?;
        hint::no_daemon(ctx, store, now());
        Ok(())
    }
}

impl Created {
    /// A dry run for a human: what would be stored, and when it would run.
    fn human_dry_run(&self, times: &[Timestamp], out: &mut Printer) -> Result<()> {
        let lp = &self.lp;
        out.line(&format!(
            "would create loop {:?} (dry run: nothing was stored)",
            lp.name
        ))?;
        out.line(&format!(
            "target:   {}",
            target_summary(lp, self.workflow.as_deref())
        ))?;
        if let Some(dir) = target_cwd(&lp.target) {
            out.line(&format!("cwd:      {}", render::escape_controls(dir, &[])))?;
        }
        super::next::print_times(out, &lp.schedule, times, crate::human::display_now())
    }
}

/// A loop's target on one line: the command, the agent's provider, or the
/// workflow.
fn target_summary(lp: &Loop, workflow: Option<&str>) -> String {
    let text = match &lp.target {
        Target::Command(t) => {
            let mut words = vec![t.command.clone()];
            let args = t.args.iter().flatten();
            words.extend(args.map(|a| render::shell_word(a)));
            format!("command {}", words.join(" "))
        }
        Target::Agent(t) => format!("agent {}", t.provider),
        Target::Workflow(t) => format!(
            "workflow {} ({})",
            workflow.unwrap_or_default(),
            t.workflow_id
        ),
    };
    render::escape_controls(&text, &[]).into_owned()
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

/// Warns about each `--watch` path of `lp` missing on this host when the
/// loop is placed here (issue 30, T8): the daemon watches it only once it
/// exists, which a typo never will.
pub(super) fn warn_if_watch_missing(warnings: &mut Warnings, lp: &Loop) {
    let Some(watch) = &lp.policy.watch else {
        return;
    };
    let here = loops_core::host_label(&loops_exec::hostname());
    if !lp.policy.runs_on.contains(&here) {
        return;
    }
    for path in &watch.paths {
        if std::fs::symlink_metadata(path).is_err() {
            warnings.push(format!(
                "--watch path {path:?} does not exist; the daemon watches it once it does"
            ));
        }
    }
}

/// Warns, before a dry run's loop is stored, when loops already have its
/// name: as [`warn_if_name_shared`] would after the create. Best effort.
fn warn_if_name_taken(warnings: &mut Warnings, store: &Store, lp: &Loop) {
    let taken = match store.require_loop(&lp.name) {
        Ok(found) if found.name == lp.name => 1,
        Err(StoreError::AmbiguousName { matches, .. }) => matches.len(),
        _ => return,
    };
    warnings.push(format!(
        "{} loops would be named {:?}; commands given this name refuse it, so use the id, or \
             give the loop another name",
        taken + 1,
        lp.name
    ));
}

/// Warns when an agent loop's provider program is not on the PATH its runs
/// get, as `doctor` checks it: the run would fail with "Executable not
/// found". Only the program is looked up; nothing runs (an account's
/// `accounts env` is left to the run).
fn warn_if_provider_missing(warnings: &mut Warnings, target: &Target) {
    let Target::Agent(agent) = target else {
        return;
    };
    let missing = |program: &str| {
        let probe = ProcessTarget::Command(CommandTarget::new(program));
        matches!(
            preflight_target(&probe, &RunMetadata::default(), &ExecOptions::default()),
            Err(ExecError::ExecutableNotFound { .. })
        )
    };
    // Cursor runs `agent`, else `cursor-agent` (agents note §15 item 2).
    let program = agent.provider.executable();
    let fallback = agent.provider.fallback_executable();
    if missing(program) && fallback.is_none_or(missing) {
        let names = match fallback {
            Some(other) => format!("{program} (or {other})"),
            None => program.to_owned(),
        };
        warnings.push(format!(
            "provider {} runs {names}, which is not on the PATH; install it, or its runs will \
             fail with \"Executable not found\"",
            agent.provider.as_str()
        ));
    }
}

/// The loop's next run in local time with its offset (issue 28), or `-`.
fn next_run(lp: &Loop) -> String {
    lp.next_run_at
        .map_or_else(|| "-".to_owned(), crate::human::local_iso)
}
