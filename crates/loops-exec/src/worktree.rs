//! Git worktrees for agent runs (issue 27; agents note §8): an agent
//! target with `worktree: auto` or `required` runs in a worktree of its
//! own, named after the run, so two loops (or two runs) on one repository
//! never share a working directory.
//!
//! Before the spawn, [`enter`] prepares the worktree (`prepare.rs`, §8.3)
//! with git run as `git.rs` says (the run's composed environment, no shell,
//! bounded in time and output) and rebuilds the agent's argv for the
//! worktree's cwd, whose `--cd`/`--dir` carry it (§8.4); for codewith and
//! codex with `workspace-write`, the repository's git common dir joins
//! `addDirs` (§8.2). A failure fails a `required` run without a spawn
//! (`worktree preparation failed (mode=required): <reason>`) and runs an
//! `auto` one in its own cwd, with a `loops:` line on its stderr that says
//! why. After the run, [`finish`] removes a succeeded run's clean worktree
//! (beyond 0.5.11, which never cleans up), and `sweep.rs` is `loops gc`'s
//! part.
//!
//! The seed that names a worktree (§8.2) is the run's id for a loop run, so
//! a retry of the run (the same row, SPEC §1.5) reuses the worktree a
//! failed attempt kept; and `<workflowRunId>:<stepId>` for a workflow step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loops_core::{AgentProvider, AgentTarget, WorktreeMode};

use crate::env::{RunMetadata, process_env};
use crate::options::{ExecOptions, RunContext};
use crate::spec::agent_argv;

use self::git::Git;
use self::prepare::{Failure, git_common_dir, prepare};

pub(crate) use self::prepare::Worktree;
pub use self::sweep::{SweepWorktrees, SweptWorktree, WorktreeSweep, sweep_worktrees};

mod git;
mod name;
mod prepare;
mod sweep;

/// The worktree root under `HOME` of the runner's base environment
/// (`base`): `$HOME/.hasna/repos/worktrees`.
pub(crate) fn root_of(base: &BTreeMap<String, String>) -> Result<PathBuf, String> {
    match base.get("HOME").map(Path::new) {
        Some(home) if home.is_absolute() => Ok(home.join(name::ROOT_UNDER_HOME)),
        _ => Err(format!(
            "worktrees live under $HOME/{}, and HOME is not an absolute path",
            name::ROOT_UNDER_HOME
        )),
    }
}

/// The seed of a run's worktree: `<workflowRunId>:<stepId>` for a step,
/// else the loop run's id.
fn seed_of(meta: &RunMetadata) -> Option<String> {
    let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    match (given(&meta.workflow_run_id), given(&meta.workflow_step_id)) {
        (Some(run), Some(step)) => Some(format!("{run}:{step}")),
        _ => given(&meta.run_id),
    }
}

/// What the executor does about an agent's worktree before the spawn.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Run as built: no worktree was asked for, or `auto` fell back, and
    /// then the note says why.
    AsBuilt(Option<String>),
    /// Run in the worktree: at its cwd, with these arguments.
    Entered {
        worktree: Worktree,
        args: Vec<String>,
    },
    /// Fail without a spawn, with this error: `required` failed, or the
    /// run was cancelled meanwhile.
    Failed(String),
}

/// Prepares the worktree `agent` asks for, if any, for a run whose checked
/// cwd is `cwd` (the runner's own when `None`) and whose composed
/// environment is `env`.
pub(crate) fn enter(
    agent: &AgentTarget,
    cwd: Option<&Path>,
    meta: &RunMetadata,
    env: &BTreeMap<String, String>,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
) -> Entry {
    let mode = agent.worktree_mode();
    if mode == WorktreeMode::Off {
        return Entry::AsBuilt(None);
    }
    let original = cwd
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let now = ctx.clock.now().as_millis();
    let now = UNIX_EPOCH + Duration::from_millis(u64::try_from(now).unwrap_or(0));
    match try_enter(agent, &original, meta, env, opts, ctx, now) {
        Ok((worktree, args)) => Entry::Entered { worktree, args },
        Err(Failure::Cancelled(reason)) => Entry::Failed(reason),
        Err(Failure::Reason(reason)) if mode == WorktreeMode::Required => Entry::Failed(format!(
            "worktree preparation failed (mode=required): {reason}"
        )),
        Err(Failure::Reason(reason)) => Entry::AsBuilt(Some(format!(
            "loops: worktree preparation failed (mode=auto); falling back to {}: {reason}",
            original.display()
        ))),
    }
}

fn try_enter(
    agent: &AgentTarget,
    original: &Path,
    meta: &RunMetadata,
    env: &BTreeMap<String, String>,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
    now: SystemTime,
) -> Result<(Worktree, Vec<String>), Failure> {
    let base = opts.base_env.as_ref().unwrap_or_else(|| process_env());
    let root = root_of(base).map_err(Failure::Reason)?;
    let seed = seed_of(meta).ok_or_else(|| {
        Failure::Reason(
            "a worktree is named after its run, and this run has no id (LOOPS_RUN_ID or \
             LOOPS_WORKFLOW_RUN_ID)"
                .to_owned(),
        )
    })?;
    let git = Git::find(env, opts, ctx.cancel).map_err(Failure::Reason)?;
    let worktree = prepare(&git, original, &root, &seed, now)?;
    let mut target = agent.clone();
    target.cwd = Some(worktree.cwd.display().to_string());
    // §8.2: a sandboxed agent may write the repository's git metadata.
    if matches!(
        agent.provider,
        AgentProvider::Codewith | AgentProvider::Codex
    ) && agent.effective_sandbox() == Some("workspace-write")
        && let Some(common) = git_common_dir(&git, &worktree.repo)
    {
        target
            .add_dirs
            .get_or_insert_default()
            .push(common.display().to_string());
    }
    let (_, args) = agent_argv(&target);
    Ok((worktree, args))
}

/// After the run: [`prepare::finish`] with git found again on `env`. The
/// line for the run's stderr, if any.
pub(crate) fn finish(
    worktree: &Worktree,
    succeeded: bool,
    keep: bool,
    env: &BTreeMap<String, String>,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
) -> Option<String> {
    match Git::find(env, opts, ctx.cancel) {
        Ok(git) => prepare::finish(&git, worktree, succeeded, keep),
        Err(e) => Some(format!(
            "loops: kept worktree {}: {e}",
            worktree.path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_is_the_step_of_a_workflow_run_else_the_loop_run() {
        let meta = |run: Option<&str>, wf: Option<&str>, step: Option<&str>| RunMetadata {
            run_id: run.map(str::to_owned),
            workflow_run_id: wf.map(str::to_owned),
            workflow_step_id: step.map(str::to_owned),
            ..RunMetadata::default()
        };
        assert_eq!(
            seed_of(&meta(Some("r1"), None, None)).as_deref(),
            Some("r1")
        );
        assert_eq!(
            seed_of(&meta(Some("r1"), Some("w1"), Some("build"))).as_deref(),
            Some("w1:build")
        );
        assert_eq!(
            seed_of(&meta(None, Some("w1"), Some("build"))).as_deref(),
            Some("w1:build")
        );
        assert_eq!(seed_of(&meta(Some(""), Some("w1"), None)), None);
        assert_eq!(seed_of(&meta(None, None, None)), None);
    }

    #[test]
    fn the_root_is_under_an_absolute_home() {
        let env = |home: &str| BTreeMap::from([("HOME".to_owned(), home.to_owned())]);
        assert_eq!(
            root_of(&env("/home/u")).unwrap(),
            Path::new("/home/u/.hasna/repos/worktrees")
        );
        assert!(root_of(&env("relative")).is_err());
        assert!(root_of(&BTreeMap::new()).is_err());
    }
}
