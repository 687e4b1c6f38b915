//! Where a command or agent loop runs (issue 16 §2): the directory
//! `loops create` ran in when `--cwd` is not given, as pueue and `at` do,
//! so `run-now` from elsewhere and the daemon (whatever its directory) run
//! the loop where its user created it. Stored absolute.
//!
//! A workflow loop's target has no directory: its steps run where each
//! step's own `cwd` says, else in the runner's directory, as in 0.3.1.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, Result, anyhow};

use crate::request::Warnings;

/// The directory to store for `--cwd` (or its absence): a leading `~` is
/// `$HOME`, a relative path is made absolute against the current
/// directory, and no `--cwd` is the current directory itself. An empty
/// value is kept for core's validation to refuse.
pub(crate) fn resolve(given: Option<&str>) -> Result<String> {
    let path = match given {
        Some("") => return Ok(String::new()),
        Some(dir) => absolute(&expand_home(dir, "--cwd")?)?,
        None => current_dir()?,
    };
    path.into_os_string().into_string().map_err(|path| {
        anyhow!(
            "the working directory {} is not valid UTF-8, which a loop cannot store; pass \
             another --cwd",
            path.to_string_lossy()
        )
    })
}

/// An agent's `--add-dir` (issue 27), made absolute as `--cwd` is.
pub(crate) fn add_dir(given: &str) -> Result<String> {
    let path = absolute(&expand_home(given, "--add-dir")?)?;
    path.into_os_string().into_string().map_err(|path| {
        anyhow!(
            "--add-dir {} is not valid UTF-8, which a loop cannot store",
            path.to_string_lossy()
        )
    })
}

/// Warns when `dir` is not an existing directory: the loop is kept (the
/// directory may be created later), but its runs fail until then.
pub(crate) fn warn_if_missing(warnings: &mut Warnings, dir: &str) {
    if !dir.is_empty() && !Path::new(dir).is_dir() {
        warnings.push(format!(
            "the working directory {dir} does not exist (yet); runs of this loop fail until \
                 it does"
        ));
    }
}

fn current_dir() -> Result<PathBuf> {
    std::env::current_dir()
        .context("reading the current directory, the loop's default working directory; pass --cwd")
}

/// `~` and `~/…` as `$HOME` and below it; anything else as it is. `flag`
/// names the option, for the message when `HOME` is not set.
pub(super) fn expand_home(dir: &str, flag: &str) -> Result<PathBuf> {
    let rest = match dir.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => return Ok(PathBuf::from(dir)),
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| {
            anyhow!("{flag} {dir} starts with ~ but HOME is not set; pass a full path")
        })?;
    Ok(Path::new(&home).join(rest))
}

/// `path` made absolute against the current directory, with `.`
/// components dropped (`..` is kept: through a symbolic link it is not
/// the parent the text suggests).
pub(super) fn absolute(path: &Path) -> Result<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        current_dir()?.join(path)
    };
    Ok(joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_absolute() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(resolve(None).unwrap(), here.to_str().unwrap());
        assert_eq!(
            resolve(Some("./a/./b")).unwrap(),
            here.join("a/b").to_str().unwrap()
        );
        assert_eq!(resolve(Some("/x/../y")).unwrap(), "/x/../y");
        assert_eq!(resolve(Some("")).unwrap(), "");
        let home = std::env::var("HOME").unwrap();
        assert_eq!(resolve(Some("~")).unwrap(), home);
        assert_eq!(
            resolve(Some("~/src")).unwrap(),
            Path::new(&home).join("src").to_str().unwrap()
        );
        // `~user` is not expanded: it is a relative name.
        assert_eq!(
            resolve(Some("~bob")).unwrap(),
            here.join("~bob").to_str().unwrap()
        );
    }
}
