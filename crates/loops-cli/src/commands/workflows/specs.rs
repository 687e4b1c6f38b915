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
use crate::resolve;

/// The id of the preview `validate` prints (SPEC §7.4).
const PREVIEW_ID: &str = "validation";

/// The most a workflow file may hold (issue 25 §1): 16 MiB, room for many
/// steps with long prompts inline, where a prompt file holds at most 1 MiB.
const WORKFLOW_FILE_MAX_BYTES: u64 = 16 << 20;

/// Reads, parses and validates a workflow file, returning it with its
/// unknown-key warnings (each with the nearest known key).
///
/// The file is read bounded, as a prompt file is: a regular file only, at
/// most [`WORKFLOW_FILE_MAX_BYTES`], never waiting on a pipe
/// (`loops_exec::read_user_file`).
///
/// A byte-order mark is skipped and a duplicate key is an error
/// (`loops_core::read_workflow_text`). When the file is invalid, the
/// warnings follow the error (a misspelt key is often why), which stays the
/// first line. A valid file's warnings are for the caller to print with
/// [`warn`] once its command succeeded, so an error from a later step
/// (a name already in use) is still the first line of stderr.
fn read_workflow(args: &FileArgs) -> Result<(NewWorkflow, Vec<String>)> {
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
    )
}

/// [`read_workflow`] of a workflow's text: `what` names it in errors,
/// `prompt_dir` gives the directory its `promptFile` paths are relative
/// to, or why none may be read.
fn parse_workflow(
    text: &str,
    what: &str,
    name: Option<&str>,
    prompt_dir: impl FnOnce() -> Result<std::path::PathBuf>,
) -> Result<(NewWorkflow, Vec<String>)> {
    let mut value = loops_core::read_workflow_text(text).map_err(|e| {
        let context = if e.is_duplicate_key() {
            what.to_owned()
        } else {
            format!("{what} is not valid JSON")
        };
        anyhow::Error::new(e).context(context)
    })?;
    super::prompt_files::resolve(&mut value, prompt_dir)?;
    let warnings = loops_core::workflow_warnings(&value);
    match loops_core::workflow_from_json(&value, name) {
        Ok(new) => Ok((new, warnings)),
        Err(e) if warnings.is_empty() => Err(e.into()),
        // The error stays the first line; the warnings follow it.
        Err(e) => {
            let warnings: Vec<String> = warnings.iter().map(|w| format!("warning: {w}")).collect();
            Err(anyhow!("{e}\n{}", warnings.join("\n")))
        }
    }
}

/// Queues a workflow file's warnings for stderr ([`render::warn`]).
fn warn(ctx: &Context, warnings: &[String]) {
    for warning in warnings {
        ctx.warn(warning);
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
    let (new, warnings) = read_workflow(&args.file)?;
    report_validation(ctx, &new, &warnings, args.preflight, out)
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
    let (new, warnings) = parse_workflow(text, "workflow", name, prompt_dir)?;
    report_validation(ctx, &new, &warnings, preflight, out)
}

/// What `validate` prints of a valid workflow, after its preflight when
/// asked.
fn report_validation(
    ctx: &Context,
    new: &NewWorkflow,
    warnings: &[String],
    preflight: bool,
    out: &mut Printer,
) -> Result<Outcome> {
    let spec = preview(new, now());
    let preflight = if preflight {
        Some(loops_workflow::preflight_new_workflow(
            new,
            &ExecOptions::default(),
        )?)
    } else {
        None
    };
    if out.json {
        let mut workflow = redact::workflow_json(&spec);
        workflow["id"] = json!(PREVIEW_ID);
        let mut report = json!({ "valid": true, "workflow": workflow });
        if let Some(preflight) = &preflight {
            report["preflight"] = serde_json::to_value(preflight)?;
        }
        out.json(&report)?;
        warn(ctx, warnings);
        return Ok(Outcome::Success);
    }
    out.line(&format!(
        "valid workflow {} steps={}",
        spec.name,
        spec.steps.len()
    ))?;
    if let Some(preflight) = &preflight {
        print_preflight(&spec, preflight, out)?;
    }
    warn(ctx, warnings);
    Ok(Outcome::Success)
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
    let (new, warnings) = read_workflow(&args.file)?;
    let store = ctx.open_store()?;
    if args.replace {
        let replaced = store.replace_workflow(&new, now())?;
        print_replaced(&replaced, out)?;
        warn(ctx, &warnings);
        return Ok(Outcome::Success);
    }
    let spec = store.create_workflow(&new, now())?;
    if out.json {
        out.json(&redact::workflow_json(&spec))?;
    } else {
        out.line(&format!(
            "created workflow {} ({}) steps={}",
            spec.id,
            spec.name,
            spec.steps.len()
        ))?;
    }
    warn(ctx, &warnings);
    Ok(Outcome::Success)
}

/// `--replace`: the new workflow as `--json`, or a line naming the one it
/// replaced and the loops that now run it.
fn print_replaced(replaced: &WorkflowReplaced, out: &mut Printer) -> std::io::Result<()> {
    let spec = &replaced.created;
    if out.json {
        return out.json(&redact::workflow_json(spec));
    }
    let Some(old) = &replaced.archived else {
        return out.line(&format!(
            "created workflow {} ({}) steps={}",
            spec.id,
            spec.name,
            spec.steps.len()
        ));
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
    let status = WorkflowStatus::from_str(args.status.trim())
        .map_err(|_| anyhow!("--status must be active or archived"))?;
    let limit = args
        .limit
        .as_deref()
        .map(|l| resolve::positive_int(l, "--limit"))
        .transpose()?;
    let store = ctx.open_store()?;
    // One more than asked, to tell whether the limit hid anything.
    let mut workflows = store.list_workflows(&WorkflowFilter {
        status: Some(status),
        limit: Some(limit.map_or(u32::MAX, |l| l.saturating_add(1))),
    })?;
    let more = limit.is_some_and(|l| workflows.len() > l as usize);
    if let Some(limit) = limit {
        workflows.truncate(limit as usize);
    }
    if out.json {
        out.json(&workflows.iter().map(redact::workflow_json).collect())?;
        return Ok(Outcome::Success);
    }
    let mut table = Table::new(vec![
        Column { header: "ID" },
        Column { header: "STATUS" },
        Column { header: "STEPS" },
        Column { header: "NAME" },
    ]);
    for spec in &workflows {
        table.row(vec![
            spec.id.to_string(),
            spec.status.to_string(),
            spec.steps.len().to_string(),
            spec.name.clone(),
        ]);
    }
    out.table(&table, |_| Vec::new())?;
    if more {
        // On stderr, as `list` and `runs` say it: stdout holds the table.
        ctx.hint(&format!(
            "showing the first {} {status} workflows; raise --limit to see more",
            workflows.len()
        ));
    }
    Ok(Outcome::Success)
}

/// `workflows show <x>`: always JSON (SPEC §7.1).
pub(super) fn show(ctx: &Context, args: &WorkflowRef, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let spec = store.require_workflow(&args.target)?;
    out.json(&redact::workflow_json(&spec))?;
    Ok(Outcome::Success)
}

/// `workflows archive <x>`: `<id> <status>`.
pub(super) fn archive(ctx: &Context, args: &WorkflowRef, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let spec = store.require_workflow(&args.target)?;
    let spec = store.archive_workflow(&spec.id, now())?;
    if out.json {
        out.json(&redact::workflow_json(&spec))?;
    } else {
        out.line(&format!("{} {}", spec.id, spec.status))?;
    }
    Ok(Outcome::Success)
}

/// `workflows schema`: the JSON Schema of workflow files, generated from
/// the types that read them. It is JSON whether or not `--json` is given.
pub(super) fn schema(out: &mut Printer) -> Result<Outcome> {
    out.json(&loops_core::workflow_file_schema())?;
    Ok(Outcome::Success)
}
