//! `create agent --prompt-file` (issue 17): the path made absolute as
//! `--cwd` is (`~` is `$HOME`, a relative path is from the current
//! directory), and the file's text now, which `create` checks as it checks
//! `--prompt` and stores as the prompt an older loops would run. Each run
//! reads the file again (`loops_exec`).

use anyhow::{Context, Result, anyhow, bail};

use super::cwd::{absolute, expand_home};

/// The absolute path of `given` and the file's text.
pub(crate) fn read(given: &str) -> Result<(String, String)> {
    if given.is_empty() {
        bail!("--prompt-file must not be empty; pass the path of a file that holds the prompt");
    }
    let path = absolute(&expand_home(given)?)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading --prompt-file {}", path.display()))?;
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
