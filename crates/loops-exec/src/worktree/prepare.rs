//! Preparing a run's worktree (agents note §8.3), with 0.5.11's checks and
//! error texts, and what happens to it after the run, which 0.5.11 leaves
//! alone (§8.4 "Cleanup: none").
//!
//! **Prepare.** A symlink at the path is refused. An existing path is
//! reused only if it is a worktree of the same repository (its top level is
//! the path itself, its git common dir the repository's); when it is on
//! another branch and clean, the expected branch is checked out again
//! (`52c762687`, `62ec68062`). An absent path is created with `git worktree
//! add` (a new branch from `HEAD`, or the existing branch), and a stale
//! registration (`missing but already registered worktree`) is pruned and
//! the add retried exactly once (0.4.18).
//!
//! **During the run** the worktree is locked (`git worktree lock`, the
//! reason naming loops and the runner's pid), so neither `git worktree
//! prune` nor `loops gc` takes it away under the agent. Locking is best
//! effort: a git that cannot lock does not stop the run.
//!
//! **After the run** ([`finish`]) it is unlocked, then:
//! - a run that did not succeed keeps it, for inspection;
//! - `keepWorktree` keeps it;
//! - a worktree with uncommitted changes (`git status --porcelain`, untracked
//!   files included) is kept, and the note says so;
//! - otherwise `git worktree remove` (never `--force`) removes it, and the
//!   repository's directory under the root goes too once empty. The branch
//!   stays: its commits are the agent's work.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::git::{Git, GitError};
use super::name::names;

/// The lock reason of a worktree a run is in; gc reads the pid back.
pub(crate) const LOCK_REASON_PREFIX: &str = "loops: a run is in it (pid ";

/// A prepared worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Worktree {
    /// The repository's top level, as git printed it.
    pub(crate) repo: String,
    /// The worktree's directory.
    pub(crate) path: PathBuf,
    /// Its branch.
    pub(crate) branch: String,
    /// Where the run starts: the worktree plus the position of the
    /// target's cwd inside the repository.
    pub(crate) cwd: PathBuf,
}

/// Why no worktree was prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The reason, as 0.5.11 words it where it has words.
    Reason(String),
    /// The run was cancelled meanwhile.
    Cancelled(String),
}

impl From<GitError> for Failure {
    fn from(e: GitError) -> Failure {
        match e {
            GitError::Failed(detail) => Failure::Reason(detail),
            GitError::Cancelled(reason) => Failure::Cancelled(reason),
        }
    }
}

/// A failed check's reason, or the cancel that interrupted it.
fn because(e: GitError, reason: impl FnOnce(&str) -> String) -> Failure {
    match e {
        GitError::Cancelled(why) => Failure::Cancelled(why),
        GitError::Failed(detail) => Failure::Reason(reason(&detail)),
    }
}

/// Prepares the worktree of `seed` for a run whose cwd is `original`, under
/// `root`, and locks it for the run. Its directory's modification time
/// becomes `now`: gc counts a kept worktree's age from its last run.
pub(crate) fn prepare(
    git: &Git<'_>,
    original: &Path,
    root: &Path,
    seed: &str,
    now: SystemTime,
) -> Result<Worktree, Failure> {
    let shown = original.display().to_string();
    let repo = git
        .run(&["-C", &shown, "rev-parse", "--show-toplevel"])
        .map_err(|e| {
            because(e, |_| {
                format!("cwd is not an existing git repository: {shown}")
            })
        })?
        .trim()
        .to_owned();
    let names = names(root, &repo, seed);
    let (path, branch) = (names.path, names.branch);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(Failure::Reason(format!(
                "refusing symlinked worktree path {}",
                path.display()
            )));
        }
        Ok(_) => reuse(git, &repo, &path, &branch)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(git, &repo, &path, &branch)?,
        Err(e) => {
            return Err(Failure::Reason(format!(
                "could not inspect worktree path {}: {e}",
                path.display()
            )));
        }
    }
    // The cwd's place in the repository, found on the resolved paths.
    let inside = match (
        std::fs::canonicalize(original),
        std::fs::canonicalize(&repo),
    ) {
        (Ok(cwd), Ok(top)) => cwd.strip_prefix(&top).map(Path::to_path_buf).ok(),
        _ => None,
    }
    .unwrap_or_default();
    let cwd = path.join(&inside);
    if !cwd.is_dir() {
        return Err(Failure::Reason(format!(
            "worktree {} has no directory {}, where the cwd is in the repository; is it \
             tracked by git?",
            path.display(),
            inside.display()
        )));
    }
    lock(git, &repo, &path);
    // Best effort: an age that cannot be refreshed only makes gc see the
    // worktree older than it is, and gc never removes a locked one.
    if let Ok(dir) = std::fs::File::open(&path) {
        let _ = dir.set_modified(now);
    }
    Ok(Worktree {
        repo,
        path,
        branch,
        cwd,
    })
}

/// Checks an existing path before it is reused (§8.3 step 3), recovering
/// a clean worktree's branch.
fn reuse(git: &Git<'_>, repo: &str, path: &Path, branch: &str) -> Result<(), Failure> {
    let p = path.display().to_string();
    let top = git
        .run(&["-C", &p, "rev-parse", "--show-toplevel"])
        .map_err(|e| because(e, |_| format!("refusing to reuse non-worktree path: {p}")))?;
    let top = top.trim();
    if std::fs::canonicalize(top).ok() != std::fs::canonicalize(path).ok() {
        return Err(Failure::Reason(format!(
            "existing worktree top-level mismatch for {p}: {top}"
        )));
    }
    let other = |_: &str| format!("existing worktree {p} belongs to a different git common dir");
    let ours = common_dir(git, repo).map_err(|e| because(e, other))?;
    let theirs = common_dir(git, &p).map_err(|e| because(e, other))?;
    if ours.is_none() || ours != theirs {
        return Err(Failure::Reason(other("")));
    }
    let current = current_branch(git, &p).map_err(|e| {
        because(e, |d| {
            format!("existing worktree {p} branch could not be inspected: {d}")
        })
    })?;
    if current == branch {
        return Ok(());
    }
    let on = if current.is_empty() {
        "a detached HEAD".to_owned()
    } else {
        format!("branch {current}")
    };
    let changes = git
        .run(&[
            "-C",
            &p,
            "status",
            "--porcelain=v1",
            "--untracked-files=all",
        ])
        .map_err(|e| {
            because(e, |d| {
                format!(
                    "existing worktree {p} is on {on}, expected {branch}, and its cleanliness \
                     could not be checked: {d}"
                )
            })
        })?;
    if !changes.trim().is_empty() {
        return Err(Failure::Reason(format!(
            "existing worktree {p} is on {on}, expected {branch}, and has local changes; \
             commit/stash them or remove the stale worktree before retrying"
        )));
    }
    let from = if current.is_empty() {
        "a detached HEAD"
    } else {
        current.as_str()
    };
    let cannot = |detail: &str| {
        format!(
            "existing worktree {p} is clean but could not recover branch {branch} from {from}; \
             remove/prune the stale worktree before retrying: {detail}"
        )
    };
    let recovered = if branch_exists(git, repo, branch)? {
        git.run(&["-C", &p, "checkout", branch, "--"])
    } else if current.is_empty() {
        git.run(&["-C", &p, "checkout", "-b", branch])
    } else {
        return Err(Failure::Reason(cannot("expected branch does not exist")));
    };
    recovered.map_err(|e| because(e, cannot))?;
    let now = current_branch(git, &p).map_err(|e| because(e, cannot))?;
    if now != branch {
        return Err(Failure::Reason(format!(
            "existing worktree {p} branch recovery ended on {now}, expected {branch}; \
             remove/prune the stale worktree before retrying"
        )));
    }
    Ok(())
}

/// Creates the worktree (§8.3 step 4), pruning a stale registration and
/// retrying once.
fn create(git: &Git<'_>, repo: &str, path: &Path, branch: &str) -> Result<(), Failure> {
    let p = path.display().to_string();
    if !git.succeeds(&["-C", repo, "rev-parse", "--is-inside-work-tree"])? {
        return Err(Failure::Reason(format!(
            "worktree repoRoot is not a git repository: {repo}"
        )));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            Failure::Reason(format!("could not create worktree parent directory: {e}"))
        })?;
    }
    let add: Vec<&str> = if branch_exists(git, repo, branch)? {
        vec!["-C", repo, "worktree", "add", "--", &p, branch]
    } else {
        vec![
            "-C", repo, "worktree", "add", "-b", branch, "--", &p, "HEAD",
        ]
    };
    let failed = |e: GitError| because(e, |d| format!("git worktree add failed for {p}: {d}"));
    match git.run(&add) {
        Ok(_) => Ok(()),
        Err(GitError::Failed(detail))
            if detail
                .to_lowercase()
                .contains("missing but already registered worktree") =>
        {
            // 0.4.18: a stale registration heals itself, once.
            git.run(&["-C", repo, "worktree", "prune"])
                .map_err(failed)?;
            git.run(&add).map(drop).map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

/// The resolved git common dir of the checkout at `dir`.
fn common_dir(git: &Git<'_>, dir: &str) -> Result<Option<PathBuf>, GitError> {
    let out = git.run(&["-C", dir, "rev-parse", "--git-common-dir"])?;
    // A relative answer is relative to `dir`.
    Ok(std::fs::canonicalize(Path::new(dir).join(out.trim())).ok())
}

/// The repository's git common dir, resolved, for codewith's and codex's
/// `--add-dir` (§8.2): `None` when git cannot say.
pub(crate) fn git_common_dir(git: &Git<'_>, repo: &str) -> Option<PathBuf> {
    common_dir(git, repo).ok().flatten()
}

fn current_branch(git: &Git<'_>, dir: &str) -> Result<String, GitError> {
    Ok(git
        .run(&["-C", dir, "branch", "--show-current"])?
        .trim()
        .to_owned())
}

fn branch_exists(git: &Git<'_>, repo: &str, branch: &str) -> Result<bool, Failure> {
    let reference = format!("refs/heads/{branch}");
    Ok(git.succeeds(&["-C", repo, "show-ref", "--verify", "--quiet", &reference])?)
}

/// Locks the worktree for the run, replacing a lock a run that died left
/// behind. Best effort.
fn lock(git: &Git<'_>, repo: &str, path: &Path) {
    let p = path.display().to_string();
    let reason = format!("{LOCK_REASON_PREFIX}{})", std::process::id());
    let args = [
        "-C", repo, "worktree", "lock", "--reason", &reason, "--", &p,
    ];
    if let Err(GitError::Failed(detail)) = git.run(&args)
        && detail.contains("already locked")
    {
        let _ = git.run(&["-C", repo, "worktree", "unlock", "--", &p]);
        let _ = git.run(&args);
    }
}

/// After the run: unlocks the worktree and removes it when the run
/// succeeded, `keep` is false and it is clean (see the module doc). The
/// line for the run's stderr, if there is one to say.
pub(crate) fn finish(
    git: &Git<'_>,
    worktree: &Worktree,
    succeeded: bool,
    keep: bool,
) -> Option<String> {
    let p = worktree.path.display().to_string();
    let branch = &worktree.branch;
    let _ = git.run(&["-C", &worktree.repo, "worktree", "unlock", "--", &p]);
    let kept = |why: &str| Some(format!("loops: kept worktree {p} (branch {branch}): {why}"));
    if !succeeded {
        return kept(
            "the run did not succeed, so it stays for inspection; `loops gc --apply` removes it \
             once it is older than --max-age-days",
        );
    }
    if keep {
        return None;
    }
    match git.run(&[
        "-C",
        &p,
        "status",
        "--porcelain=v1",
        "--untracked-files=all",
    ]) {
        Err(e) => return kept(&format!("its changes could not be checked: {}", e.detail())),
        Ok(changes) if !changes.trim().is_empty() => {
            return kept(
                "it has uncommitted changes; commit them, or remove it with `git worktree \
                 remove --force`",
            );
        }
        Ok(_) => {}
    }
    if let Err(e) = git.run(&["-C", &worktree.repo, "worktree", "remove", "--", &p]) {
        return kept(&format!("git worktree remove failed: {}", e.detail()));
    }
    if let Some(parent) = worktree.path.parent() {
        // Only when empty: the repository's other worktrees stay.
        let _ = std::fs::remove_dir(parent);
    }
    Some(format!(
        "loops: removed worktree {p}; branch {branch} keeps its commits"
    ))
}
