//! `loops gc`'s part in worktrees (beyond 0.5.11, which never removes
//! one): the kept worktrees under the root that are older than the cut-off
//! go, with `git worktree remove` and then `git worktree prune` in their
//! repository.
//!
//! What is looked at: the directories two levels under the root
//! (`<repoSlug>/<seedSlug>`), not symlinks, whose modification time (which
//! each run in them refreshes) is before the cut-off. What is removed, of
//! those: only a registered worktree of its repository (git lists it in
//! `git worktree list`, and it is not the main checkout) that
//! - is not locked, except by a loops run whose process is gone (a run in
//!   it holds a lock; any other lock is the owner's, and stays even with
//!   `--force`);
//! - has no uncommitted changes, untracked files included, unless `force`.
//!
//! Everything else old is reported as kept, with the reason. A dry run
//! (`apply` false) runs the same checks and removes nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use loops_core::Timestamp;

use super::git::{Git, GitError};
use super::prepare::LOCK_REASON_PREFIX;
use super::root_of;
use crate::env::{base_without_database_credentials, process_env};
use crate::options::ExecOptions;
use crate::path::normalize_path;
use crate::process::is_running;

/// What [`sweep_worktrees`] is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepWorktrees {
    /// Worktrees last used before this instant are candidates.
    pub older_than: Timestamp,
    /// Remove them; otherwise only say what would go.
    pub apply: bool,
    /// Remove them even with uncommitted changes, which are lost.
    pub force: bool,
}

/// One worktree [`sweep_worktrees`] removed or kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweptWorktree {
    /// Its directory.
    pub path: PathBuf,
    /// Its branch, when git named one.
    pub branch: Option<String>,
    /// Why it was kept; `None` for one removed.
    pub reason: Option<String>,
}

/// What [`sweep_worktrees`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeSweep {
    /// The root it looked under; `None` without a `HOME`.
    pub root: Option<PathBuf>,
    /// Removed (or, in a dry run, to be removed), in path order.
    pub removed: Vec<SweptWorktree>,
    /// Old enough, but kept, in path order.
    pub kept: Vec<SweptWorktree>,
}

/// Removes the kept worktrees under `$HOME/.hasna/repos/worktrees` (the
/// `HOME` of `opts`' base environment) that `sweep` names, as the module
/// doc says. Git runs with that environment (loops' database credentials
/// removed, the PATH normalized) and `opts.git_timeout` per call.
pub fn sweep_worktrees(sweep: &SweepWorktrees, opts: &ExecOptions) -> WorktreeSweep {
    let base = opts.base_env.as_ref().unwrap_or_else(|| process_env());
    let Ok(root) = root_of(base) else {
        return WorktreeSweep::default();
    };
    let mut report = WorktreeSweep {
        root: Some(root.clone()),
        ..WorktreeSweep::default()
    };
    let mut env = base_without_database_credentials(base);
    env.insert("PATH".to_owned(), normalize_path(&env));
    let cutoff = UNIX_EPOCH
        + Duration::from_millis(u64::try_from(sweep.older_than.as_millis()).unwrap_or(0));
    let old: Vec<PathBuf> = subdirectories(&root)
        .iter()
        .flat_map(|repo| subdirectories(repo))
        .filter(|dir| {
            std::fs::symlink_metadata(dir)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < cutoff)
        })
        .collect();
    if old.is_empty() {
        return report;
    }
    let git = match Git::find(&env, opts, None) {
        Ok(git) => git,
        Err(e) => {
            report.kept = old
                .into_iter()
                .map(|path| SweptWorktree {
                    path,
                    branch: None,
                    reason: Some(e.clone()),
                })
                .collect();
            return report;
        }
    };
    for dir in old {
        let (branch, outcome) = sweep_one(&git, &dir, sweep);
        let swept = SweptWorktree {
            path: dir,
            branch,
            reason: outcome.err(),
        };
        if swept.reason.is_none() {
            report.removed.push(swept);
        } else {
            report.kept.push(swept);
        }
    }
    report
}

/// The directories in `dir`, symlinks left out, sorted.
fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Listed {
    path: PathBuf,
    branch: Option<String>,
    /// `Some` when locked, with the reason (maybe empty).
    locked: Option<String>,
}

fn parse_list(porcelain: &str) -> Vec<Listed> {
    let mut listed = Vec::new();
    for block in porcelain.split("\n\n") {
        let mut entry: Option<Listed> = None;
        for line in block.lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match (key, entry.as_mut()) {
                ("worktree", _) => {
                    entry = Some(Listed {
                        path: PathBuf::from(value),
                        ..Listed::default()
                    });
                }
                ("branch", Some(e)) => {
                    e.branch = Some(
                        value
                            .strip_prefix("refs/heads/")
                            .unwrap_or(value)
                            .to_owned(),
                    );
                }
                ("locked", Some(e)) => e.locked = Some(value.to_owned()),
                _ => {}
            }
        }
        listed.extend(entry);
    }
    listed
}

/// Removes `dir` if it may go: its branch, and `Ok` when removed (or, in a
/// dry run, removable), else why it stays.
fn sweep_one(
    git: &Git<'_>,
    dir: &Path,
    sweep: &SweepWorktrees,
) -> (Option<String>, Result<(), String>) {
    let d = dir.display().to_string();
    let not_ours = || "not a registered git worktree; gc leaves it alone".to_owned();
    let Ok(list) = git.run(&["-C", &d, "worktree", "list", "--porcelain"]) else {
        return (None, Err(not_ours()));
    };
    let here = std::fs::canonicalize(dir).ok();
    let listed = parse_list(&list);
    // The first entry is the main checkout, never a candidate.
    let Some(main) = listed.first() else {
        return (None, Err(not_ours()));
    };
    let Some(entry) = listed
        .iter()
        .skip(1)
        .find(|e| here.is_some() && std::fs::canonicalize(&e.path).ok() == here)
    else {
        return (None, Err(not_ours()));
    };
    let branch = entry.branch.clone();
    let main = main.path.display().to_string();
    let mut stale_lock = false;
    if let Some(reason) = &entry.locked {
        match loops_pid(reason) {
            Some(pid) if is_running(pid) => {
                return (branch, Err(format!("a run is in it (pid {pid})")));
            }
            Some(_) => stale_lock = true,
            None if reason.is_empty() => return (branch, Err("it is locked".to_owned())),
            None => return (branch, Err(format!("it is locked: {reason}"))),
        }
    }
    if !sweep.force {
        match git.run(&[
            "-C",
            &d,
            "status",
            "--porcelain=v1",
            "--untracked-files=all",
        ]) {
            Err(e) => {
                let why = format!("its changes could not be checked: {}", e.detail());
                return (branch, Err(why));
            }
            Ok(changes) if !changes.trim().is_empty() => {
                let why = "it has uncommitted changes; --force removes it anyway".to_owned();
                return (branch, Err(why));
            }
            Ok(_) => {}
        }
    }
    if !sweep.apply {
        return (branch, Ok(()));
    }
    if stale_lock {
        let _ = git.run(&["-C", &main, "worktree", "unlock", "--", &d]);
    }
    let mut remove = vec!["-C", main.as_str(), "worktree", "remove"];
    if sweep.force {
        remove.push("--force");
    }
    remove.extend(["--", d.as_str()]);
    if let Err(e) = git.run(&remove) {
        return (branch, Err(removal_failed(&e)));
    }
    let _ = git.run(&["-C", &main, "worktree", "prune"]);
    if let Some(parent) = dir.parent() {
        let _ = std::fs::remove_dir(parent);
    }
    (branch, Ok(()))
}

fn removal_failed(e: &GitError) -> String {
    format!("git worktree remove failed: {}", e.detail())
}

/// The pid in a lock reason loops wrote, `None` for anyone else's.
fn loops_pid(reason: &str) -> Option<u32> {
    reason
        .strip_prefix(LOCK_REASON_PREFIX)?
        .strip_suffix(')')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_porcelain_list_gives_paths_branches_and_locks() {
        let text = "worktree /r\nHEAD 1\nbranch refs/heads/main\n\n\
                    worktree /w/a\nHEAD 2\nbranch refs/heads/openloops/r/a-1\nlocked\n\n\
                    worktree /w/b\nHEAD 3\ndetached\nlocked loops: a run is in it (pid 42)\n\n";
        let listed = parse_list(text);
        assert_eq!(
            listed,
            [
                Listed {
                    path: "/r".into(),
                    branch: Some("main".into()),
                    locked: None
                },
                Listed {
                    path: "/w/a".into(),
                    branch: Some("openloops/r/a-1".into()),
                    locked: Some(String::new())
                },
                Listed {
                    path: "/w/b".into(),
                    branch: None,
                    locked: Some("loops: a run is in it (pid 42)".into())
                },
            ]
        );
        assert_eq!(loops_pid("loops: a run is in it (pid 42)"), Some(42));
        assert_eq!(loops_pid("moving disks"), None);
        assert_eq!(loops_pid("loops: a run is in it (pid x)"), None);
    }
}
