//! Agent runs in git worktrees (issue 27; agents note §8), in a real
//! repository each test makes: creation named after the run, reuse by a
//! retry, branch recovery, the symlink refusal, `required` failing without
//! a spawn, `auto` falling back with a note, a hung git bounded by its
//! timeout, the cleanup after success, and what is kept (a failed run's, a
//! dirty one, `keepWorktree`); then `sweep_worktrees`, gc's part.
//!
//! Every test is skipped, with a line on stderr, where `git` is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use loops_core::{AgentProvider, AgentTarget, ExecutorResult, ExecutorStatus, ProcessTarget};
use loops_core::{Timestamp, WorktreeMode};
use loops_exec::{ExecOptions, RunMetadata, SweepWorktrees, sweep_worktrees};

use crate::support::*;

/// Whether git is installed; says so on stderr when it is not.
fn has_git() -> bool {
    let found = Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: git is not installed");
    }
    found
}

/// Runs `git -C dir <args>` for the test and returns its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository at `<fixture>/repo` with one commit holding `sub/file`.
fn repo(fx: &Fixture) -> PathBuf {
    let repo = fx.path("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::write(repo.join("sub/file"), "tracked\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    std::fs::canonicalize(repo).unwrap()
}

/// The fixture's options: git never looks above the fixture for a
/// repository, and its calls time out after `git_timeout`.
fn opts(fx: &Fixture) -> ExecOptions {
    let mut env = fx.env();
    let above = fx.dir.path().parent().unwrap().display().to_string();
    env.insert("GIT_CEILING_DIRECTORIES".to_owned(), above);
    env.insert("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned());
    fx.opts_with(env)
}

/// The worktree root under the fixture's HOME.
fn root(fx: &Fixture) -> PathBuf {
    fx.home().join(".hasna/repos/worktrees")
}

/// A codex fake: prints its cwd, then each argument; reads its prompt; then
/// runs `then` in its cwd.
fn codex(fx: &Fixture, then: &str) {
    fx.fake(
        "codex",
        &format!("pwd -P; for a in \"$@\"; do printf '%s\\n' \"$a\"; done; cat >/dev/null; {then}"),
    );
}

fn agent(cwd: &Path, mode: WorktreeMode) -> AgentTarget {
    let mut a = AgentTarget::new(AgentProvider::Codex, "fix it");
    a.cwd = Some(cwd.display().to_string());
    a.worktree = Some(mode);
    a
}

fn loop_run(id: &str) -> RunMetadata {
    RunMetadata {
        run_id: Some(id.to_owned()),
        ..RunMetadata::default()
    }
}

fn go(a: &AgentTarget, meta: &RunMetadata, opts: &ExecOptions) -> ExecutorResult {
    run_full(&ProcessTarget::Agent(a.clone()), meta, opts)
        .0
        .unwrap()
}

/// The worktree a result names.
fn worktree_of(r: &ExecutorResult) -> PathBuf {
    PathBuf::from(r.facts.worktree.as_deref().expect("a worktree"))
}

#[test]
fn a_run_gets_a_worktree_named_after_it_and_a_clean_one_goes_after_success() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    // The agent sees its worktree locked while it runs.
    codex(&fx, "git worktree list --porcelain");
    let r = go(
        &agent(&repo.join("sub"), WorktreeMode::Required),
        &loop_run("0123456789ab"),
        &opts(&fx),
    );
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    let path = worktree_of(&r);
    let branch = r.facts.worktree_branch.clone().unwrap();
    // §8.2: <root>/<repoSlug>/<seedSlug>, openloops/<repoSlug>/<seedSlug>.
    let seed_slug = path.file_name().unwrap().to_str().unwrap().to_owned();
    assert_eq!(path.parent().unwrap(), root(&fx).join("repo"));
    assert!(
        seed_slug.starts_with("0123456789ab-") && seed_slug.len() == 12 + 1 + 8,
        "{seed_slug}"
    );
    assert_eq!(branch, format!("openloops/repo/{seed_slug}"));
    // It ran at the cwd's place in the worktree, and --cd says so; the
    // repository's git dir is writable to the sandboxed agent (§8.2).
    let lines: Vec<&str> = r.stdout.lines().collect();
    let cwd = std::fs::canonicalize(&path).unwrap_or(path.clone());
    let cwd = cwd.join("sub").display().to_string();
    assert_eq!(lines[0], cwd);
    let after = |flag: &str| {
        lines
            .windows(2)
            .find(|w| w[0] == flag)
            .map(|w| w[1].to_owned())
    };
    assert_eq!(after("--cd"), Some(path.join("sub").display().to_string()));
    assert_eq!(
        after("--add-dir"),
        Some(repo.join(".git").display().to_string())
    );
    assert!(
        r.stdout.contains("locked loops: a run is in it (pid "),
        "{}",
        r.stdout
    );
    // Gone after success; its branch stays, the checkout is untouched.
    assert!(!path.exists(), "{}", r.stderr);
    assert!(
        !path.parent().unwrap().exists(),
        "the empty repo directory goes too"
    );
    assert_eq!(
        r.stderr,
        format!(
            "loops: entered worktree {} branch {branch}\nloops: removed worktree {}; branch \
             {branch} keeps its commits\n",
            path.display(),
            path.display()
        )
    );
    assert!(git(&repo, &["branch", "--list", &branch]).contains(&branch));
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&repo, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

#[test]
fn a_failed_run_keeps_its_worktree_and_a_retry_reuses_it() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    let opts = opts(&fx);
    let target = agent(&repo, WorktreeMode::Required);
    // The first attempt commits, leaves a file, and fails.
    codex(
        &fx,
        "echo one > committed; git add committed; git -c user.name=a -c user.email=a@b commit -qm one; \
         echo draft > draft; exit 3",
    );
    let first = go(&target, &loop_run("run-1"), &opts);
    assert_eq!(first.status, ExecutorStatus::Failed);
    let path = worktree_of(&first);
    assert!(path.join("draft").exists());
    assert!(
        first.stderr.ends_with(&format!(
            "loops: kept worktree {} (branch {}): the run did not succeed, so it stays for \
             inspection; `loops gc --apply` removes it once it is older than --max-age-days\n",
            path.display(),
            first.facts.worktree_branch.as_deref().unwrap()
        )),
        "{}",
        first.stderr
    );
    // Unlocked once the run is over.
    assert!(!git(&repo, &["worktree", "list", "--porcelain"]).contains("locked"));
    // The retry (the same run) finds what the first attempt left; it is
    // dirty, so it stays after success too.
    codex(&fx, "cat draft committed");
    let retry = go(&target, &loop_run("run-1"), &opts);
    assert_eq!(retry.status, ExecutorStatus::Succeeded, "{retry:?}");
    assert_eq!(worktree_of(&retry), path);
    assert!(retry.stdout.ends_with("draft\none\n"), "{}", retry.stdout);
    assert!(path.exists());
    assert!(
        retry.stderr.ends_with(&format!(
            "loops: kept worktree {} (branch {}): it has uncommitted changes; commit them, or \
             remove it with `git worktree remove --force`\n",
            path.display(),
            retry.facts.worktree_branch.as_deref().unwrap()
        )),
        "{}",
        retry.stderr
    );
    // Nothing reached the main checkout.
    assert!(!repo.join("draft").exists() && !repo.join("committed").exists());
    // Another run gets another worktree.
    let other = go(&target, &loop_run("run-2"), &opts);
    assert_ne!(worktree_of(&other), path);
}

#[test]
fn a_clean_worktree_on_another_branch_is_brought_back_and_a_dirty_one_refused() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    let opts = opts(&fx);
    let mut target = agent(&repo, WorktreeMode::Required);
    target.keep_worktree = Some(true);
    codex(&fx, "git branch --show-current");
    let first = go(&target, &loop_run("r"), &opts);
    let (path, branch) = (
        worktree_of(&first),
        first.facts.worktree_branch.clone().unwrap(),
    );
    assert!(path.exists(), "keepWorktree keeps a clean one");
    assert!(first.stdout.ends_with(&format!("{branch}\n")));
    assert_eq!(first.stderr.lines().count(), 1, "{}", first.stderr);
    // Detached and clean: the expected branch is checked out again.
    git(&path, &["checkout", "-q", "--detach"]);
    let back = go(&target, &loop_run("r"), &opts);
    assert_eq!(back.status, ExecutorStatus::Succeeded, "{back:?}");
    assert!(back.stdout.ends_with(&format!("{branch}\n")));
    // On another branch with changes: refused, nothing spawned.
    git(&path, &["checkout", "-q", "-b", "elsewhere"]);
    std::fs::write(path.join("wip"), "x").unwrap();
    let refused = go(&target, &loop_run("r"), &opts);
    assert_eq!(refused.status, ExecutorStatus::Failed);
    assert_eq!(refused.pid, None);
    assert_eq!(
        refused.error.unwrap(),
        format!(
            "worktree preparation failed (mode=required): existing worktree {} is on branch \
             elsewhere, expected {branch}, and has local changes; commit/stash them or remove \
             the stale worktree before retrying",
            path.display()
        )
    );
}

#[test]
fn a_symlink_at_the_worktree_path_is_refused() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    let opts = opts(&fx);
    let target = agent(&repo, WorktreeMode::Required);
    codex(&fx, "true");
    let path = worktree_of(&go(&target, &loop_run("r"), &opts));
    assert!(!path.exists());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(fx.path("repo"), &path).unwrap();
    let r = go(&target, &loop_run("r"), &opts);
    assert_eq!((r.status, r.pid), (ExecutorStatus::Failed, None));
    assert_eq!(
        r.error.unwrap(),
        format!(
            "worktree preparation failed (mode=required): refusing symlinked worktree path {}",
            path.display()
        )
    );
}

#[test]
fn required_fails_without_a_spawn_and_auto_runs_in_the_cwd_with_a_note() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let plain = fx.path("plain");
    std::fs::create_dir(&plain).unwrap();
    let plain = std::fs::canonicalize(plain).unwrap();
    let opts = opts(&fx);
    codex(&fx, "touch ran");
    let required = go(
        &agent(&plain, WorktreeMode::Required),
        &loop_run("r"),
        &opts,
    );
    assert_eq!(
        (required.status, required.pid),
        (ExecutorStatus::Failed, None)
    );
    let reason = format!("cwd is not an existing git repository: {}", plain.display());
    assert_eq!(
        required.error.unwrap(),
        format!("worktree preparation failed (mode=required): {reason}")
    );
    assert!(!plain.join("ran").exists());
    assert_eq!(required.facts.worktree, None);

    let auto = go(&agent(&plain, WorktreeMode::Auto), &loop_run("r"), &opts);
    assert_eq!(auto.status, ExecutorStatus::Succeeded, "{auto:?}");
    assert!(plain.join("ran").exists());
    // The argv is built for the cwd actually used.
    let lines: Vec<&str> = auto.stdout.lines().collect();
    assert_eq!(lines[0], plain.display().to_string());
    let cd = lines.iter().position(|l| *l == "--cd").unwrap();
    assert_eq!(lines[cd + 1], plain.display().to_string());
    assert_eq!(
        auto.stderr,
        format!(
            "loops: worktree preparation failed (mode=auto); falling back to {}: {reason}\n",
            plain.display()
        )
    );
    assert_eq!(auto.facts.worktree, None);

    // Without a run id there is nothing to name the worktree after.
    let unnamed = go(
        &agent(&plain, WorktreeMode::Required),
        &RunMetadata::default(),
        &opts,
    );
    assert!(
        unnamed
            .error
            .unwrap()
            .ends_with("this run has no id (LOOPS_RUN_ID or LOOPS_WORKFLOW_RUN_ID)")
    );
}

#[test]
fn a_workflow_step_is_named_after_its_workflow_run_and_step() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    codex(&fx, "true");
    let meta = RunMetadata {
        run_id: Some("loop-run".into()),
        workflow_run_id: Some("wfrun".into()),
        workflow_step_id: Some("build".into()),
        ..RunMetadata::default()
    };
    let r = go(&agent(&repo, WorktreeMode::Auto), &meta, &opts(&fx));
    let branch = r.facts.worktree_branch.unwrap();
    assert!(
        branch.starts_with("openloops/repo/wfrun-build-"),
        "{branch}"
    );
}

#[test]
fn each_git_call_is_bounded_in_time() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    // A git that hangs, first on the PATH.
    fx.fake("git", "sleep 30");
    codex(&fx, "true");
    let opts = ExecOptions {
        git_timeout: Duration::from_millis(200),
        ..opts(&fx)
    };
    let started = std::time::Instant::now();
    let r = go(&agent(&repo, WorktreeMode::Required), &loop_run("r"), &opts);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        r.error.unwrap(),
        format!(
            "worktree preparation failed (mode=required): cwd is not an existing git \
             repository: {}",
            repo.display()
        )
    );
    // Where the answer is not the exit status, the timeout is the detail.
    std::fs::remove_file(fx.bin().join("git")).unwrap();
    let real = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real = String::from_utf8(real.stdout).unwrap().trim().to_owned();
    // rev-parse answers, `worktree add` hangs.
    fx.fake(
        "git",
        &format!("case \"$*\" in *'worktree add'*) sleep 30;; *) exec '{real}' \"$@\";; esac"),
    );
    let r = go(&agent(&repo, WorktreeMode::Required), &loop_run("r"), &opts);
    let error = r.error.unwrap();
    assert!(
        error.starts_with(
            "worktree preparation failed (mode=required): git worktree add failed for "
        ) && error.ends_with(": git worktree add timed out after 200ms"),
        "{error}"
    );
}

/// Sets the modification time of `dir` to `days` days ago.
fn age(dir: &Path, days: u32) {
    let status = Command::new("touch")
        .args(["-d", &format!("{days} days ago")])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn gc_sweeps_old_clean_worktrees_and_keeps_dirty_young_and_locked_ones() {
    if !has_git() {
        return;
    }
    let fx = Fixture::new();
    let repo = repo(&fx);
    let opts = opts(&fx);
    let mut target = agent(&repo, WorktreeMode::Required);
    target.keep_worktree = Some(true);
    codex(&fx, "true");
    let kept = |id: &str| worktree_of(&go(&target, &loop_run(id), &opts));
    let [clean, dirty, young, locked, running, crashed] =
        ["clean", "dirty", "young", "locked", "running", "crashed"].map(kept);
    std::fs::write(dirty.join("wip"), "x").unwrap();
    let lock = |dir: &Path, reason: &str| {
        let dir = dir.display().to_string();
        git(&repo, &["worktree", "lock", "--reason", reason, "--", &dir]);
    };
    lock(&locked, "moving disks");
    // A run of this process is in one; the runner of another is gone.
    lock(
        &running,
        &format!("loops: a run is in it (pid {})", std::process::id()),
    );
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    lock(&crashed, &format!("loops: a run is in it (pid {gone_pid})"));
    // Not a worktree at all: left alone.
    let stray = root(&fx).join("repo/stray");
    std::fs::create_dir_all(&stray).unwrap();
    for dir in [&clean, &dirty, &locked, &running, &crashed, &stray] {
        age(dir, 40);
    }
    let sweep = |apply, force, older_than| {
        sweep_worktrees(
            &SweepWorktrees {
                older_than,
                apply,
                force,
            },
            &opts,
        )
    };
    // Nothing is that old.
    let none = sweep(
        true,
        false,
        Timestamp::parse("2000-01-01T00:00:00Z").unwrap(),
    );
    assert!(none.removed.is_empty() && none.kept.is_empty());
    let cutoff = now_minus_days(30);
    let dry = sweep(false, false, cutoff);
    assert_eq!(dry.root.as_deref(), Some(root(&fx).as_path()));
    let mut removable = vec![clean.clone(), crashed.clone()];
    removable.sort();
    assert_eq!(paths(&dry.removed), removable);
    assert!(clean.exists(), "a dry run removes nothing");
    let mut reasons: Vec<(PathBuf, String)> = dry
        .kept
        .iter()
        .map(|k| (k.path.clone(), k.reason.clone().unwrap()))
        .collect();
    reasons.sort();
    let mut want = vec![
        (
            dirty.clone(),
            "it has uncommitted changes; --force removes it anyway".to_owned(),
        ),
        (locked.clone(), "it is locked: moving disks".to_owned()),
        (
            running.clone(),
            format!("a run is in it (pid {})", std::process::id()),
        ),
        (
            stray.clone(),
            "not a registered git worktree; gc leaves it alone".to_owned(),
        ),
    ];
    want.sort();
    assert_eq!(reasons, want);
    let applied = sweep(true, false, cutoff);
    assert_eq!(paths(&applied.removed), removable);
    let branch = |p: &Path| {
        applied
            .removed
            .iter()
            .find(|s| s.path == p)
            .and_then(|s| s.branch.clone())
            .unwrap()
    };
    assert!(branch(&clean).starts_with("openloops/repo/clean-"));
    assert!(!clean.exists() && !crashed.exists());
    assert!(dirty.exists() && young.exists() && locked.exists() && running.exists());
    // --force takes the dirty one too, never a locked one or the stray.
    let forced = sweep(true, true, cutoff);
    assert_eq!(paths(&forced.removed), [dirty.as_path()]);
    assert!(!dirty.exists() && locked.exists() && running.exists() && stray.exists());
    // Pruned: git lists only what is left (the checkout, young, locked,
    // running).
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 4, "{listed}");
}

fn paths(swept: &[loops_exec::SweptWorktree]) -> Vec<PathBuf> {
    swept.iter().map(|s| s.path.clone()).collect()
}

/// Now less `days` days, from the system clock.
fn now_minus_days(days: i64) -> Timestamp {
    let now = loops_core::Clock::now(&loops_exec::SystemClock);
    now.add_ms(-days * 86_400_000)
}
