//! PATH normalization, the executable check and the working-directory check
//! (SPEC §5.5, §5.6, §9 items 29 and 32).
//!
//! **Append, not prepend.** [`normalize_path`] keeps the environment's own
//! `PATH` entries first and *appends* the common user bin directories
//! (`~/.local/bin`, `~/.cargo/bin`, Homebrew, …). The original's README says
//! they are prepended, but its code appends them (SPEC §9 item 32); we match
//! the code. Appending means a user's own PATH order always wins: the extra
//! directories only help a service manager's minimal PATH find tools that a
//! login shell would have found, and never shadow a binary the user chose.
//!
//! **Relative names.** A program name containing `/` that is relative
//! (`./run.sh`, `bin/x`) is resolved against the *target's* working
//! directory, which is where the child will run. The original resolved it
//! against the loops process's own directory (SPEC §9 item 29), so the check
//! and the spawn could disagree. Bare names are searched in the target's
//! PATH with the `which` crate.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

use nix::unistd::{AccessFlags, access};

use crate::error::{CwdError, ExecError};

/// The common user and system bin directories appended to every PATH, in
/// order (SPEC §5.5). `home` is `$HOME` of the environment being built.
fn common_dirs(env: &BTreeMap<String, String>, home: &Path) -> Vec<String> {
    let under = |base: &Path, rel: &str| base.join(rel).to_string_lossy().into_owned();
    let set = |name: &str| env.get(name).filter(|v| !v.is_empty());
    let mut dirs = vec![
        under(home, ".local/bin"),
        under(home, ".bun/bin"),
        under(home, ".cargo/bin"),
        under(home, ".npm-global/bin"),
        under(home, "bin"),
    ];
    if let Some(bun) = set("BUN_INSTALL") {
        dirs.push(under(Path::new(bun), "bin"));
    }
    if let Some(pnpm) = set("PNPM_HOME") {
        dirs.push(pnpm.clone());
    }
    if let Some(prefix) = set("NPM_CONFIG_PREFIX") {
        dirs.push(under(Path::new(prefix), "bin"));
    }
    dirs.extend(
        [
            "/opt/homebrew/bin",
            "/usr/local/bin",
            "/usr/bin",
            "/bin",
            "/usr/sbin",
            "/sbin",
        ]
        .map(String::from),
    );
    dirs
}

/// The PATH a target runs with: `env`'s own `PATH` entries, then the common
/// bin directories, trimmed, without duplicates (the first occurrence wins)
/// and without empty or relative entries (issue 25 §9): for the OS an empty
/// entry, `.` or `bin` mean the current directory or a directory under it,
/// so a program planted there would run in place of the one meant, in a
/// probe of `doctor` or in a run. [`dropped_path_entries`] names them.
///
/// `$HOME` is read from `env`, falling back to the OS home directory.
///
/// ```
/// use std::collections::BTreeMap;
/// let env = BTreeMap::from([
///     ("PATH".to_string(), "/usr/bin: /bin::/usr/bin".to_string()),
///     ("HOME".to_string(), "/home/u".to_string()),
/// ]);
/// let path = loops_exec::normalize_path(&env);
/// assert!(path.starts_with("/usr/bin:/bin:/home/u/.local/bin:"));
/// assert!(path.ends_with(":/usr/local/bin:/usr/sbin:/sbin"));
/// ```
pub fn normalize_path(env: &BTreeMap<String, String>) -> String {
    let home = match env.get("HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => std::env::home_dir().unwrap_or_default(),
    };
    let own = env.get("PATH").map(String::as_str).unwrap_or("");
    let mut seen = HashSet::new();
    let mut parts = Vec::new();
    let common = common_dirs(env, &home);
    for part in own.split(':').chain(common.iter().map(String::as_str)) {
        let part = part.trim();
        if is_kept(part) && seen.insert(part) {
            parts.push(part);
        }
    }
    parts.join(":")
}

/// Whether [`normalize_path`] keeps a trimmed PATH entry: only absolute
/// directories.
fn is_kept(entry: &str) -> bool {
    entry.starts_with('/')
}

/// The entries of `path` that [`normalize_path`] drops as empty or
/// relative, as they are written (untrimmed), in order, each once.
///
/// ```
/// assert_eq!(
///     loops_exec::dropped_path_entries(".:/usr/bin::bin:/bin:."),
///     [".", "", "bin"]
/// );
/// assert!(loops_exec::dropped_path_entries("/usr/bin:/bin").is_empty());
/// ```
pub fn dropped_path_entries(path: &str) -> Vec<&str> {
    if path.is_empty() {
        return Vec::new();
    }
    let mut dropped: Vec<&str> = Vec::new();
    for part in path.split(':') {
        if !is_kept(part.trim()) && !dropped.contains(&part) {
            dropped.push(part);
        }
    }
    dropped
}

/// Resolves `program` the way the child's `exec` will: a name with `/` is a
/// path (relative ones against `cwd`), any other name is searched in `path`.
/// Returns an absolute path when `cwd` is absolute.
pub(crate) fn find_executable(program: &str, path: &str, cwd: &Path) -> Result<PathBuf, ExecError> {
    let not_found = || ExecError::ExecutableNotFound {
        program: program.to_owned(),
        path: path.to_owned(),
    };
    if program.is_empty() {
        return Err(not_found());
    }
    if program.contains('/') {
        // Checked by hand rather than through `which`, which would expand a
        // leading `~` that the child's exec would not.
        let relative: PathBuf = Path::new(program)
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        let candidate = cwd.join(relative);
        return if is_executable_file(&candidate) {
            Ok(candidate)
        } else {
            Err(not_found())
        };
    }
    which::which_in(program, Some(path), cwd).map_err(|_| not_found())
}

/// The program a run starts: [`find_executable`] of `program`, else of
/// `fallback` (cursor's `cursor-agent` when `agent` is missing, agents note
/// §15 item 2), with the name that was found and, for a fallback, the line
/// that says so. The error is `program`'s.
pub(crate) fn find_program<'p>(
    program: &'p str,
    fallback: Option<&'p str>,
    path: &str,
    cwd: &Path,
) -> Result<Found<'p>, ExecError> {
    let error = match find_executable(program, path, cwd) {
        Ok(found) => {
            return Ok(Found {
                path: found,
                name: program,
                note: None,
            });
        }
        Err(e) => e,
    };
    match fallback.and_then(|f| Some((f, find_executable(f, path, cwd).ok()?))) {
        Some((name, found)) => Ok(Found {
            path: found,
            name,
            note: Some(format!("loops: {name} ran, since {program} is not on PATH")),
        }),
        None => Err(error),
    }
}

/// What [`find_program`] found.
#[derive(Debug)]
pub(crate) struct Found<'p> {
    /// The resolved program.
    pub(crate) path: PathBuf,
    /// Its name as looked up: `argv[0]`, and what preflight reports.
    pub(crate) name: &'p str,
    /// For a fallback, the line the run's stderr starts with.
    pub(crate) note: Option<String>,
}

fn is_executable_file(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file()) && access(path, AccessFlags::X_OK).is_ok()
}

/// Checks that `cwd` is a directory the child can enter, and returns it as
/// an absolute path (relative ones are taken from the loops process's own
/// directory, as the OS would).
pub(crate) fn check_cwd(cwd: &str) -> Result<PathBuf, CwdError> {
    let absolute = std::path::absolute(cwd).map_err(|e| CwdError::NotAccessible {
        cwd: cwd.to_owned(),
        reason: e.to_string(),
    })?;
    match std::fs::metadata(&absolute) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CwdError::Missing {
            cwd: cwd.to_owned(),
        }),
        Err(e) => Err(CwdError::NotAccessible {
            cwd: cwd.to_owned(),
            reason: e.to_string(),
        }),
        Ok(meta) if !meta.is_dir() => Err(CwdError::NotADirectory {
            cwd: cwd.to_owned(),
        }),
        Ok(_) => match access(&absolute, AccessFlags::X_OK) {
            Ok(()) => Ok(absolute),
            Err(errno) => Err(CwdError::NotAccessible {
                cwd: cwd.to_owned(),
                reason: errno.desc().to_owned(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const TAIL: &str = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

    #[test]
    fn own_entries_come_first_then_common_dirs() {
        // SPEC §10 item 57.
        let e = env(&[("PATH", "/usr/bin:/bin"), ("HOME", "/h")]);
        assert_eq!(
            normalize_path(&e),
            format!(
                "/usr/bin:/bin:/h/.local/bin:/h/.bun/bin:/h/.cargo/bin:/h/.npm-global/bin:/h/bin:\
                 /opt/homebrew/bin:/usr/local/bin:/usr/sbin:/sbin"
            )
        );
    }

    #[test]
    fn entries_are_trimmed_and_deduplicated_first_wins() {
        let e = env(&[("PATH", " /sbin ::/x:/x: /h/bin"), ("HOME", "/h")]);
        let path = normalize_path(&e);
        assert!(path.starts_with("/sbin:/x:/h/bin:/h/.local/bin:"), "{path}");
        let parts: Vec<&str> = path.split(':').collect();
        let unique: HashSet<&str> = parts.iter().copied().collect();
        assert_eq!(parts.len(), unique.len(), "{path}");
        assert!(parts.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn empty_and_relative_entries_are_dropped() {
        // Issue 25 §9: `doctor` ran `./accounts --version` with `.` on PATH.
        let e = env(&[("PATH", ":.:/a::bin:./x: . :/b:"), ("HOME", "/h")]);
        let path = normalize_path(&e);
        assert!(path.starts_with("/a:/b:/h/.local/bin:"), "{path}");
        assert!(path.split(':').all(|p| p.starts_with('/')), "{path}");
        assert_eq!(
            dropped_path_entries(":.:/a::bin:./x: . :/b:"),
            ["", ".", "bin", "./x", " . "]
        );
        // A relative HOME gives relative common directories: dropped too.
        let relative_home = normalize_path(&env(&[("PATH", "/a"), ("HOME", "h")]));
        assert!(
            relative_home.starts_with("/a:/opt/homebrew/bin:"),
            "{relative_home}"
        );
        assert!(dropped_path_entries("").is_empty());
    }

    #[test]
    fn conditional_dirs_follow_their_variables() {
        let e = env(&[
            ("PATH", ""),
            ("HOME", "/h/"),
            ("BUN_INSTALL", "/b"),
            ("PNPM_HOME", "/p"),
            ("NPM_CONFIG_PREFIX", "/n"),
        ]);
        assert_eq!(
            normalize_path(&e),
            format!(
                "/h/.local/bin:/h/.bun/bin:/h/.cargo/bin:/h/.npm-global/bin:/h/bin:\
                 /b/bin:/p:/n/bin:{TAIL}"
            )
        );
        let unset = env(&[("HOME", "/h"), ("BUN_INSTALL", "")]);
        assert!(!normalize_path(&unset).contains("/bin/bin"));
    }

    #[test]
    fn home_falls_back_to_the_os_home() {
        let Some(home) = std::env::home_dir() else {
            return;
        };
        let path = normalize_path(&env(&[("PATH", "/usr/bin")]));
        let expected = home.join(".local/bin");
        assert!(path.contains(&*expected.to_string_lossy()), "{path}");
    }

    #[test]
    fn a_missing_program_falls_back_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().to_str().unwrap();
        let fake = |name: &str| {
            use std::os::unix::fs::PermissionsExt;
            let file = dir.path().join(name);
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let found = |fallback| find_program("agent", fallback, bin, dir.path());
        assert!(found(Some("cursor-agent")).is_err());
        fake("cursor-agent");
        let fell_back = found(Some("cursor-agent")).unwrap();
        assert_eq!(fell_back.name, "cursor-agent");
        assert_eq!(
            fell_back.note.as_deref(),
            Some("loops: cursor-agent ran, since agent is not on PATH")
        );
        assert_eq!(
            found(None).unwrap_err().to_string(),
            format!("Executable not found in PATH: agent. Effective PATH={bin}")
        );
        fake("agent");
        let direct = found(Some("cursor-agent")).unwrap();
        assert_eq!((direct.name, direct.note), ("agent", None));
        assert_eq!(direct.path, dir.path().join("agent"));
    }

    #[test]
    fn missing_and_non_directory_cwds_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let missing = missing.to_str().unwrap();
        assert_eq!(
            check_cwd(missing).unwrap_err().to_string(),
            format!("working directory does not exist: {missing}")
        );
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let file = file.to_str().unwrap();
        assert_eq!(
            check_cwd(file).unwrap_err().to_string(),
            format!("working directory is not a directory: {file}")
        );
        assert_eq!(check_cwd(dir.path().to_str().unwrap()).unwrap(), dir.path());
    }
}
