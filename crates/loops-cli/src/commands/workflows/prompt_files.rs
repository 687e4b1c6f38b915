//! `promptFile` on the agent steps of a workflow file (issue 17): a path
//! relative to the workflow file's directory, stored absolute, whose text
//! is filled in as the step's `prompt` (what an older loops runs, and what
//! core checks as any prompt). Each run reads the file again.
//!
//! A prompt file is read as a run reads it (issue 25 §1): a regular file
//! only, at most [`loops_exec::PROMPT_FILE_MAX_BYTES`], never waiting on a
//! pipe; MCP's `loops_workflow_validate` comes through here too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Resolves every agent step's `promptFile` in `workflow`, a workflow's raw
/// JSON, before core validates it. `dir` gives the directory the paths are
/// relative to (the workflow file's), or why no file may be read; it is
/// asked only when a step has a `promptFile`.
pub(super) fn resolve(workflow: &mut Value, dir: impl FnOnce() -> Result<PathBuf>) -> Result<()> {
    let Some(steps) = workflow.get_mut("steps").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let mut dir = Some(dir);
    let mut base: Option<PathBuf> = None;
    for (i, step) in steps.iter_mut().enumerate() {
        let Some(target) = step.get_mut("target").and_then(Value::as_object_mut) else {
            continue;
        };
        if target.get("type").and_then(Value::as_str) != Some("agent") {
            continue;
        }
        let label = format!("steps[{i}].target");
        let path = match target.get("promptFile") {
            None => continue,
            Some(Value::String(path)) if !path.is_empty() => {
                if base.is_none()
                    && let Some(dir) = dir.take()
                {
                    base = Some(dir()?);
                }
                base.as_deref().unwrap_or(Path::new("")).join(path)
            }
            Some(_) => bail!("{label}.promptFile must be a non-empty string, the prompt's path"),
        };
        if target.contains_key("prompt") {
            bail!("{label} has both prompt and promptFile; keep one of them");
        }
        let text = crate::commands::create::prompt_file::read_bounded(
            &path,
            &format!("{label}.promptFile"),
        )?;
        if text.trim().is_empty() {
            bail!(
                "{label}.promptFile {} is empty; write the prompt into it first",
                path.display()
            );
        }
        let Some(absolute) = path.to_str() else {
            bail!(
                "{label}.promptFile {} is not valid UTF-8, which a workflow cannot store",
                path.display()
            );
        };
        target.insert("promptFile".to_owned(), Value::from(absolute));
        target.insert("prompt".to_owned(), Value::from(text));
    }
    Ok(())
}

/// The absolute directory of the workflow file `file`.
pub(super) fn directory_of(file: &str) -> Result<PathBuf> {
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    if dir.is_absolute() {
        return Ok(dir.to_path_buf());
    }
    let here = std::env::current_dir()
        .context("reading the current directory, to resolve the workflow's promptFile paths")?;
    Ok(here.join(dir))
}
