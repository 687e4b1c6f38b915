//! `create agent --prompt-file` (issue 17): the path made absolute as
//! `--cwd` is (`~` is `$HOME`, a relative path is from the current
//! directory), and the file's text now, which `create` checks as it checks
//! `--prompt` and stores as the prompt an older loops would run. Each run
//! reads the file again (`loops_exec`).
//!
//! The file is read as every run reads it (issue 25 §1): a regular file
//! only, at most [`loops_exec::PROMPT_FILE_MAX_BYTES`], never waiting on a
//! pipe.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use loops_exec::{PROMPT_FILE_MAX_BYTES, UserFileError};

use super::cwd::{absolute, expand_home};

/// The absolute path of `given` and the file's text.
pub(crate) fn read(given: &str) -> Result<(String, String)> {
    if given.is_empty() {
        bail!("--prompt-file must not be empty; pass the path of a file that holds the prompt");
    }
    let path = absolute(&expand_home(given, "--prompt-file")?)?;
    let text = read_bounded(&path, "--prompt-file")?;
    if text.trim().is_empty() {
        bail!(
            "--prompt-file {} is empty; write the prompt into it first",
            path.display()
        );
    }
    let path = path.into_os_string().into_string().map_err(|path| {
        anyhow!(
            "--prompt-file {} is not valid UTF-8, which a loop cannot store; pass another path",
            path.to_string_lossy()
        )
    })?;
    Ok((path, text))
}

/// The text of the prompt file at `path`, read as a run reads it; `what`
/// names it in errors (`--prompt-file`), which say what to do.
pub(crate) fn read_bounded(path: &Path, what: &str) -> Result<String> {
    loops_exec::read_user_file(path, what, PROMPT_FILE_MAX_BYTES).map_err(|e| match e {
        UserFileError::NotRegular { .. } => {
            anyhow!("{e}; point it at a regular file that holds the prompt")
        }
        UserFileError::TooLarge { .. } => anyhow!("{e}; shorten the prompt"),
        e => e.into(),
    })
}
