//! Workflow files and stored workflows: `validate`, `create`, `list`,
//! `show`, `archive` and `schema` (SPEC §6.1, §7.4).
//!
//! A workflow file is read and validated by core
//! (`loops_core::workflow_from_json`), whose messages are printed verbatim.
//! `validate` never opens the store: its preview carries the id
//! `validation`, as the original's does.

use std::str::FromStr;

use anyhow::{Result, anyhow};
use loops_core::{NewWorkflow, Timestamp, WorkflowId, WorkflowSpec, WorkflowStatus};
use loops_exec::{ExecOptions, Preflight, UserFileError};
use loops_store::{WorkflowFilter, WorkflowReplaced};
use serde_json::json;

use crate::args::workflow::{CreateArgs, FileArgs, ListArgs, ValidateArgs, WorkflowRef};
use crate::commands::now;
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact;
use crate::render::{Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// The id of the preview `validate` prints (SPEC §7.4).
const PREVIEW_ID: &str = "validation";

/// The most a workflow file may hold (issue 25 §1): 16 MiB, room for many
/// steps with long prompts inline, where a prompt file holds at most 1 MiB.
pub(crate) const WORKFLOW_FILE_MAX_BYTES: u64 = 16 << 20;

/// Reads, parses and validates a workflow file; its unknown-key warnings
/// (each with the nearest known key) go to `warnings`.
///
/// The file is read bounded, as a prompt file is: a regular file only, at
/// most [`WORKFLOW_FILE_MAX_BYTES`], never waiting on a pipe
/// (`loops_exec::read_user_file`).
///
/// A byte-order mark is skipped and a duplicate key is an error
/// (`loops_core::read_workflow_text`). When the file is invalid, the
/// warnings follow the error (a misspelt key is often why), which stays the
/// first line. A valid file's warnings are printed once its command
/// succeeded (`request::serve`), so an error from a later step (a name
/// already in use) is still the first line of stderr.
fn read_workflow(args: &FileArgs, warnings: &mut Warnings) -> Result<NewWorkflow> {
    let path = std::path::Path::new(&args.file);
    let text = loops_exec::read_user_file(path, "workflow file", WORKFLOW_FILE_MAX_BYTES).map_err(
        |e| match e {
            UserFileError::NotRegular { .. } => {
                anyhow!("{e}; write the workflow to a regular file first")
            }
            UserFileError::TooLarge { .. } => {
                anyhow!("{e}; move long prompts into promptFile files")
            }
            e => e.into(),
        },
    )?;
    parse_workflow(
        &text,
        &format!("workflow file {}", args.file),
        args.name.as_deref(),
        || super::prompt_files::directory_of(&args.file),
        warnings,
    )
}

/// [`read_workflow`] of a workflow's text: `what` names it in errors,
/// `prompt_dir` gives the directory its `promptFile` paths, a step's
/// relative `cwd` and a command's `./program` are relative to
/// (`relative_paths`), or why no file may be read.
pub(crate) fn parse_workflow(
    text: &str,
    what: &str,
    name: Option<&str>,
    prompt_dir: impl FnOnce() -> Result<std::path::PathBuf>,
    warnings: &mut Warnings,
) -> Result<NewWorkflow> {
    let mut value = loops_core::read_workflow_text(text).map_err(|e| {
        let context = if e.is_duplicate_key() {
            what.to_owned()
        } else {
            format!("{what} is not valid JSON")
        };
        anyhow::Error::new(e).context(context)
    })?;
    // Asked once: the prompt files and the relative paths share it.
    let dir = prompt_dir().map_err(|e| format!("{e:#}"));
    super::prompt_files::resolve(&mut value, || dir.clone().map_err(anyhow::Error::msg))?;
    if let Ok(dir) = &dir {
        super::relative_paths::resolve(&mut value, dir);
    }
    let found = loops_core::workflow_warnings(&value);
    match loops_core::workflow_from_json(&value, name) {
        Ok(new) => {
            for warning in found {
                warnings.push(warning);
            }
            Ok(new)
        }
        Err(e) if found.is_empty() => Err(e.into()),
        // The error stays the first line; the warnings follow it.
        Err(e) => {
            let found: Vec<String> = found.iter().map(|w| format!("warning: {w}")).collect();
            Err(anyhow!("{e}\n{}", found.join("\n")))
        }
    }
}

/// The workflow `validate` describes: what `create` would store, not yet
/// stored. Its id is a placeholder that the JSON shows as `validation`.
fn preview(new: &NewWorkflow, now: Timestamp) -> WorkflowSpec {
    WorkflowSpec {
        id: WorkflowId::from_bytes([0; 6]),
        name: new.name.clone(),
        description: new.description.clone(),
        version: new.version,
        status: WorkflowStatus::Active,
        steps: new.steps.clone(),
        max_parallel: new.max_parallel,
        created_at: now,
        updated_at: now,
    }
}

/// `workflows validate <file> [--name] [--preflight]`.
pub(super) fn validate(ctx: &Context, args: &ValidateArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        Ok(WorkflowValidate {
            new: read_workflow(&args.file, warnings)?,
            preflight: args.preflight,
        })
    })
}

/// `workflows validate` of a workflow's JSON text rather than a file
/// (`loops mcp`'s `loops_workflow_validate`): `prompt_dir` as in
/// [`parse_workflow`].
pub(crate) fn validate_text(
    ctx: &Context,
    text: &str,
    name: Option<&str>,
    preflight: bool,
    prompt_dir: impl FnOnce() -> Result<std::path::PathBuf>,
    out: &mut Printer,
) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        Ok(WorkflowValidate {
            new: parse_workflow(text, "workflow", name, prompt_dir, warnings)?,
            preflight,
        })
    })
}

/// The typed request of `workflows validate`: a valid workflow, not
/// stored, and whether to preflight its steps.
struct WorkflowValidate {
    new: NewWorkflow,
    preflight: bool,
}

/// What `validate` returns: the workflow as `create` would store it, and
/// its preflight when asked.
struct Validated {
    spec: WorkflowSpec,
    preflight: Option<Vec<Preflight>>,
}

impl Request for WorkflowValidate {
    type Document = Validated;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<Validated> {
        let spec = preview(&self.new, now());
        let preflight = if self.preflight {
            Some(loops_workflow::preflight_new_workflow(
                &self.new,
                &ExecOptions::default(),
            )?)
        } else {
            None
        };
        Ok(Validated { spec, preflight })
    }
}

impl Document for Validated {
    /// `{valid, workflow, preflight?}`, the workflow's id `validation`.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut workflow = redact::workflow_json(&self.spec);
        workflow["id"] = json!(PREVIEW_ID);
        let mut report = json!({ "valid": true, "workflow": workflow });
        if let Some(preflight) = &self.preflight {
            report["preflight"] = serde_json::to_value(preflight)?;
        }
        out.json(&report)?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let spec = &self.spec;
        out.line(&format!(
            "valid workflow {} steps={}",
            spec.name,
            spec.steps.len()
        ))?;
        if let Some(preflight) = &self.preflight {
            print_preflight(spec, preflight, out)?;
        }
        Ok(())
    }
}

/// One line per step, in execution order as preflight checks them:
/// `  <stepId>  <command>[  account=<profile>[/<tool>]]`.
fn print_preflight(
    spec: &WorkflowSpec,
    preflight: &[Preflight],
    out: &mut Printer,
) -> std::io::Result<()> {
    let order = loops_core::workflow_execution_order(&spec.steps);
    let width = order
        .iter()
        .map(|s| s.id.chars().count())
        .max()
        .unwrap_or(0);
    for (step, checked) in order.iter().zip(preflight) {
        let mut line = format!("  {:<width$}  {}", step.id, checked.command);
        if let Some(profile) = &checked.account_profile {
            line.push_str(&format!("  account={profile}"));
            if let Some(tool) = &checked.account_tool {
                line.push_str(&format!("/{tool}"));
            }
        }
        out.line(&line)?;
    }
    Ok(())
}

/// `workflows create <file> [--name] [--replace]`.
pub(super) fn create(ctx: &Context, args: &CreateArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        Ok(WorkflowCreate {
            new: read_workflow(&args.file, warnings)?,
            replace: args.replace,
        })
    })
}

/// The typed request of `workflows create`: a valid workflow to store,
/// replacing the active one of its name with `--replace`.
struct WorkflowCreate {
    new: NewWorkflow,
    replace: bool,
}

/// What `workflows create` returns.
enum WorkflowCreated {
    Created(WorkflowSpec),
    /// With `--replace`.
    Replaced(WorkflowReplaced),
}

impl Request for WorkflowCreate {
    type Document = WorkflowCreated;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<WorkflowCreated> {
        let store = ctx.open_store()?;
        for (i, step) in self.new.steps.iter().enumerate() {
            // A step of a pool nobody created would never be limited (Q2).
            crate::commands::pools::require_pool(Some(&store), step.pool.as_deref())
                .map_err(|e| anyhow!("workflow.steps[{i}].pool: {e}"))?;
        }
        Ok(if self.replace {
            WorkflowCreated::Replaced(store.replace_workflow(&self.new, now())?)
        } else {
            WorkflowCreated::Created(store.create_workflow(&self.new, now())?)
        })
    }
}

impl Document for WorkflowCreated {
    /// The new workflow.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let spec = match self {
            WorkflowCreated::Created(spec) => spec,
            WorkflowCreated::Replaced(replaced) => &replaced.created,
        };
        out.json(&redact::workflow_json(spec))?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        match self {
            WorkflowCreated::Created(spec) => out.line(&created_line(spec))?,
            WorkflowCreated::Replaced(replaced) => print_replaced(replaced, out)?,
        }
        Ok(())
    }
}

/// `created workflow <id> (<name>) steps=<n>`.
fn created_line(spec: &WorkflowSpec) -> String {
    format!(
        "created workflow {} ({}) steps={}",
        spec.id,
        spec.name,
        spec.steps.len()
    )
}

/// `--replace`: a line naming the workflow it replaced and the loops that
/// now run the new one.
fn print_replaced(replaced: &WorkflowReplaced, out: &mut Printer) -> std::io::Result<()> {
    let spec = &replaced.created;
    let Some(old) = &replaced.archived else {
        return out.line(&created_line(spec));
    };
    let loops = match replaced.repointed.len() {
        0 => "no loop ran it".to_owned(),
        1 => format!("1 loop now runs the new one: {}", replaced.repointed[0]),
        n => format!(
            "{n} loops now run the new one: {}",
            replaced
                .repointed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    out.line(&format!(
        "replaced workflow {} ({}) with {} steps={}; {} is archived with its runs; {loops}",
        old.id,
        spec.name,
        spec.id,
        spec.steps.len(),
        old.id
    ))
}

/// `workflows list` / `ls [--status active] [--limit N]`.
pub(super) fn list(ctx: &Context, args: &ListArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        let status = WorkflowStatus::from_str(args.status.trim())
            .map_err(|_| anyhow!("--status must be active or archived"))?;
        let limit = args
            .limit
            .as_deref()
            .map(|l| resolve::positive_int(l, "--limit"))
            .transpose()?;
        Ok(WorkflowList { status, limit })
    })
}

/// The typed request of `workflows list`: the workflows of a status, at
/// most `limit` of them.
struct WorkflowList {
    status: WorkflowStatus,
    limit: Option<u32>,
}

/// What `workflows list` returns; `more` when the limit hid some.
struct WorkflowsListed {
    workflows: Vec<WorkflowSpec>,
    status: WorkflowStatus,
    more: bool,
}

impl Request for WorkflowList {
    type Document = WorkflowsListed;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<WorkflowsListed> {
        let store = ctx.open_store()?;
        // One more than asked, to tell whether the limit hid anything.
        let mut workflows = store.list_workflows(&WorkflowFilter {
            status: Some(self.status),
            limit: Some(self.limit.map_or(u32::MAX, |l| l.saturating_add(1))),
        })?;
        let more = self.limit.is_some_and(|l| workflows.len() > l as usize);
        if let Some(limit) = self.limit {
            workflows.truncate(limit as usize);
        }
        Ok(WorkflowsListed {
            workflows,
            status: self.status,
            more,
        })
    }
}

impl Document for WorkflowsListed {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&self.workflows.iter().map(redact::workflow_json).collect())?;
        Ok(())
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        // On a terminal the table fits its width (issue 28): NAME is cut
        // with `…`; nothing is dropped.
        let mut table = Table::new(vec![
            Column::keep("ID"),
            Column::keep("STATUS"),
            Column::keep("STEPS"),
            Column::shrink("NAME"),
        ]);
        for spec in &self.workflows {
            table.row(vec![
                spec.id.to_string(),
                spec.status.to_string(),
                spec.steps.len().to_string(),
                spec.name.clone(),
            ]);
        }
        out.table(&table, |_| Vec::new())?;
        if self.more {
            // On stderr, as `list` and `runs` say it: stdout holds the table.
            ctx.hint(&format!(
                "showing the first {} {} workflows; raise --limit to see more",
                self.workflows.len(),
                self.status
            ));
        }
        Ok(())
    }
}

/// `workflows show <x>`: always JSON (SPEC §7.1).
pub(super) fn show(ctx: &Context, args: &WorkflowRef, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(WorkflowShow {
            target: args.target.clone(),
        })
    })
}

/// The typed request of `workflows show`: one workflow, by id or name.
struct WorkflowShow {
    target: String,
}

/// What `workflows show` returns: always JSON, for humans too.
struct WorkflowShown(WorkflowSpec);

impl Request for WorkflowShow {
    type Document = WorkflowShown;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<WorkflowShown> {
        let store = ctx.open_store()?;
        Ok(WorkflowShown(store.require_workflow(&self.target)?))
    }
}

impl Document for WorkflowShown {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&redact::workflow_json(&self.0))?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        self.json(out)
    }
}

/// `workflows archive <x>`: `<id> <status>`.
pub(super) fn archive(ctx: &Context, args: &WorkflowRef, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(WorkflowArchive {
            target: args.target.clone(),
        })
    })
}

/// The typed request of `workflows archive`: one workflow, by id or name.
struct WorkflowArchive {
    target: String,
}

/// What `workflows archive` returns: the archived workflow.
struct Archived(WorkflowSpec);

impl Request for WorkflowArchive {
    type Document = Archived;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Archived> {
        let store = ctx.open_store()?;
        let spec = store.require_workflow(&self.target)?;
        Ok(Archived(store.archive_workflow(&spec.id, now())?))
    }
}

impl Document for Archived {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&redact::workflow_json(&self.0))?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        out.line(&format!("{} {}", self.0.id, self.0.status))?;
        Ok(())
    }
}

/// `workflows schema`: the JSON Schema of workflow files, generated from
/// the types that read them. It is JSON whether or not `--json` is given.
pub(super) fn schema(ctx: &Context, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| Ok(WorkflowSchema))
}

/// The typed request of `workflows schema`.
struct WorkflowSchema;

/// What `workflows schema` returns: the schema, always JSON.
struct Schema(serde_json::Value);

impl Request for WorkflowSchema {
    type Document = Schema;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<Schema> {
        Ok(Schema(loops_core::workflow_file_schema()))
    }
}

impl Document for Schema {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&self.0)?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        self.json(out)
    }
}
