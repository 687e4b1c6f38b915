//! One bounded `git` call (agents note §8.3): run directly, never through
//! a shell, with the run's composed environment, stdin from `/dev/null`,
//! in a process group of its own that the supervisor tears down after
//! [`ExecOptions::git_timeout`] (5 minutes, as upstream) or at the run's
//! cancel, and with each stream capped at [`GIT_OUTPUT_BYTES`].
//!
//! The callers pass every path after `-C` or after `--`, and every branch
//! name after `-b` or as `refs/heads/…`, so no value of the user's is read
//! as an option.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cancel::CancelToken;
use crate::options::ExecOptions;
use crate::path::find_executable;
use crate::supervise::{self, Cause, Launch, Limits};

/// Per-stream cap of a git call's captured output: enough for a `worktree
/// list` of a few thousand worktrees; a longer one keeps its tail.
pub(crate) const GIT_OUTPUT_BYTES: usize = 256 * 1024;

/// The most of git's own words an error quotes.
const MAX_DETAIL_BYTES: usize = 1000;

/// Why a git call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GitError {
    /// It failed, timed out or could not start; what git said, on one line.
    Failed(String),
    /// The run was cancelled, with the token's reason.
    Cancelled(String),
}

impl GitError {
    /// What went wrong, for a message.
    pub(crate) fn detail(&self) -> &str {
        match self {
            GitError::Failed(detail) | GitError::Cancelled(detail) => detail,
        }
    }
}

/// How to run git: the program found on the environment's PATH, the
/// environment, the bounds and the cancel.
pub(crate) struct Git<'a> {
    program: PathBuf,
    env: &'a BTreeMap<String, String>,
    opts: &'a ExecOptions,
    cancel: Option<&'a CancelToken>,
}

impl<'a> Git<'a> {
    /// Finds `git` on the PATH of `env`; the error says it is missing.
    pub(crate) fn find(
        env: &'a BTreeMap<String, String>,
        opts: &'a ExecOptions,
        cancel: Option<&'a CancelToken>,
    ) -> Result<Git<'a>, String> {
        let path = env.get("PATH").map_or("", String::as_str);
        // The normalized PATH holds only absolute entries, so the
        // directory never decides which git runs.
        let program = find_executable("git", path, Path::new("/")).map_err(|e| e.to_string())?;
        Ok(Git {
            program,
            env,
            opts,
            cancel,
        })
    }

    /// Runs `git <args>` and returns its stdout; a non-zero exit, a
    /// timeout, a spawn error and a cancel are errors.
    pub(crate) fn run(&self, args: &[&str]) -> Result<String, GitError> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let launch = Launch {
            program: &self.program,
            arg0: "git",
            args: &args,
            cwd: None,
            env: self.env,
            stdin: None,
        };
        let running = supervise::spawn(&launch)
            .map_err(|e| GitError::Failed(format!("git could not start: {e}")))?;
        let finished = running.supervise(&Limits {
            timeout: Some(self.opts.git_timeout),
            idle: None,
            cancel: self.cancel,
            kill_grace: self.opts.kill_grace,
            leak_timeout: self.opts.leak_timeout,
            max_output_bytes: GIT_OUTPUT_BYTES,
            log: None,
            seen: None,
        });
        let what = subcommand(&args);
        match finished.cause {
            Some(Cause::Cancelled(reason)) => return Err(GitError::Cancelled(reason)),
            Some(Cause::TimedOut | Cause::Idle) => {
                let ms = self.opts.git_timeout.as_millis();
                return Err(GitError::Failed(format!("{what} timed out after {ms}ms")));
            }
            None => {}
        }
        match finished.status {
            Some(status) if status.success() => Ok(finished.stdout),
            status => {
                let said = one_line(if finished.stderr.trim().is_empty() {
                    &finished.stdout
                } else {
                    &finished.stderr
                });
                let code = status
                    .and_then(|s| s.code())
                    .map_or_else(|| "unknown".to_owned(), |c| c.to_string());
                Err(GitError::Failed(if said.is_empty() {
                    format!("{what} exited with code {code}")
                } else {
                    said
                }))
            }
        }
    }

    /// Whether `git <args>` succeeds: for the checks whose answer is their
    /// exit status. A cancel is an error.
    pub(crate) fn succeeds(&self, args: &[&str]) -> Result<bool, GitError> {
        match self.run(args) {
            Ok(_) => Ok(true),
            Err(GitError::Failed(_)) => Ok(false),
            Err(cancelled) => Err(cancelled),
        }
    }
}

/// `git` and the first two words of `args` that are not options (`-C`'s
/// directory skipped), for a message: `git worktree add`.
fn subcommand(args: &[String]) -> String {
    let mut shown = vec!["git"];
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "-C" => {
                words.next();
            }
            word if word.starts_with('-') => {}
            word if shown.len() < 3 => shown.push(word),
            _ => break,
        }
    }
    shown.join(" ")
}

/// What git said, its lines joined with `; ` and cut to its last
/// [`MAX_DETAIL_BYTES`] (git's verdict comes last).
pub(crate) fn one_line(text: &str) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if joined.len() <= MAX_DETAIL_BYTES {
        return joined;
    }
    let mut start = joined.len() - MAX_DETAIL_BYTES;
    while !joined.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &joined[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_one_bounded_line_that_keeps_the_verdict() {
        assert_eq!(
            one_line("Preparing worktree (new branch 'x')\n\nfatal: no\n"),
            "Preparing worktree (new branch 'x'); fatal: no"
        );
        let long = format!("{}\nfatal: the end", "é".repeat(2000));
        let line = one_line(&long);
        assert!(line.ends_with("fatal: the end") && line.starts_with('…'));
        assert!(line.len() <= MAX_DETAIL_BYTES + '…'.len_utf8());
    }

    #[test]
    fn the_subcommand_names_the_call() {
        let args = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            subcommand(&args(&["-C", "/r", "worktree", "add", "--", "/p"])),
            "git worktree add"
        );
        assert_eq!(
            subcommand(&args(&["-C", "/r", "rev-parse", "--show-toplevel"])),
            "git rev-parse"
        );
        assert_eq!(subcommand(&args(&["--version"])), "git");
    }
}
