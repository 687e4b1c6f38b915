//! Issue 27, "Worktrees" (agents note §8): `--worktree` and
//! `--keep-worktree` on `create agent` and `edit`; two agent loops on one
//! repository running at once, each in its own worktree; `runs <id>`
//! naming the worktree and branch; and `gc` removing an old kept worktree
//! while leaving a dirty one without `--force`.
//!
//! The repository is a real one the test makes; every test is skipped,
//! with a line on stderr, where `git` is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use loops_tests::TestEnv;
use serde_json::Value;

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

/// Runs `git -C dir <args>` and returns its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// A repository `<home>/repo` with one commit; its resolved path.
fn repo(env: &TestEnv) -> PathBuf {
    let repo = env.home().join("repo");
    std::fs::create_dir_all(&repo).expect("a repo dir");
    std::fs::write(repo.join("README"), "hello\n").expect("a file");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    std::fs::canonicalize(repo).expect("a repo")
}

/// `create agent <name> --provider claude` in `repo`, with `extra`.
fn create(env: &TestEnv, name: &str, repo: &Path, extra: &[&str]) -> Value {
    let repo = repo.to_str().expect("a UTF-8 path");
    env.loops(["--json", "create", "agent", name, "--provider", "claude"])
        .args(["--prompt", "p", "--every", "1h", "--cwd", repo])
        .args(extra)
        .run()
        .json()
}

/// The one run of `name`, with its output.
fn only_run(env: &TestEnv, name: &str) -> Value {
    let runs = env
        .loops(["--json", "runs", name, "--show-output"])
        .run()
        .json();
    let runs = runs.as_array().expect("an array");
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

fn text<'a>(run: &'a Value, key: &str) -> &'a str {
    run[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {run}"))
}

#[test]
fn two_agent_loops_on_one_repository_never_share_a_working_directory() {
    if !has_git() {
        return;
    }
    let env = TestEnv::new();
    let repo = repo(&env);
    let marks = env.home().join("marks");
    std::fs::create_dir(&marks).expect("a marks dir");
    // The fake claude says where it runs, writes a file named after its
    // loop there, and waits (for at most 60 s: a loaded CI machine may
    // start the other one late) until the other loop's agent has started
    // too, so the two run at the same time; `clean` writes nothing and
    // does not wait.
    env.write_script(
        "claude",
        &format!(
            "cat > /dev/null\nmarks='{}'\npwd -P\n\
             [ \"$LOOPS_LOOP_NAME\" = clean ] && exit 0\n\
             echo \"$LOOPS_LOOP_NAME\" > \"$LOOPS_LOOP_NAME.txt\"\n\
             touch \"$marks/$LOOPS_LOOP_NAME\"\n\
             other=a; [ \"$LOOPS_LOOP_NAME\" = a ] && other=b\n\
             i=0; while [ ! -e \"$marks/$other\" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n\
             [ -e \"$marks/$other\" ] && echo \"saw $other\"",
            marks.display()
        ),
    );
    for name in ["a", "b", "clean"] {
        let created = create(&env, name, &repo, &["--worktree", "required"]);
        assert_eq!(created["target"]["worktree"], "required");
    }
    let a = env.spawn(&["run-now", "a"]);
    let b = env.spawn(&["run-now", "b"]);
    for child in [a, b] {
        let out = child.wait_with_output().expect("run-now ends");
        assert!(
            out.status.success(),
            "stdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    env.loops(["run-now", "clean"]).run();

    let root = env.home().join(".hasna/repos/worktrees/repo");
    let mut seen = Vec::new();
    for (name, other) in [("a", "b"), ("b", "a")] {
        let run = only_run(&env, name);
        assert_eq!(text(&run, "status"), "succeeded", "{run}");
        let worktree = PathBuf::from(text(&run, "worktree"));
        let branch = text(&run, "worktreeBranch");
        assert_eq!(worktree.parent(), Some(root.as_path()));
        let seed = worktree
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a name");
        assert_eq!(branch, format!("openloops/repo/{seed}"));
        // It ran in its own worktree, at the same time as the other.
        let stdout = text(&run, "stdout");
        let cwd = std::fs::canonicalize(&worktree).expect("kept: it is dirty");
        assert_eq!(stdout.lines().next(), cwd.to_str(), "{stdout}");
        assert!(stdout.contains(&format!("saw {other}")), "{stdout}");
        // Its file is only there, and it was kept for its changes.
        assert!(worktree.join(format!("{name}.txt")).exists());
        assert!(!worktree.join(format!("{other}.txt")).exists());
        assert!(
            text(&run, "stderr").contains("it has uncommitted changes"),
            "{run}"
        );
        // `runs <id>` names both.
        let id = text(&run, "id");
        env.loops(["runs", id])
            .stdout_has(&format!("worktree:  {}\n", worktree.display()))
            .stdout_has(&format!("branch:    {branch}\n"))
            .run();
        seen.push((worktree, branch.to_owned()));
    }
    assert_ne!(seen[0], seen[1]);
    // Nothing reached the main checkout.
    assert!(!repo.join("a.txt").exists() && !repo.join("b.txt").exists());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    // A clean worktree goes after success; its branch stays.
    let clean = only_run(&env, "clean");
    let worktree = PathBuf::from(text(&clean, "worktree"));
    assert!(!worktree.exists());
    let branch = text(&clean, "worktreeBranch");
    assert!(git(&repo, &["branch", "--list", branch]).contains(branch));
    env.loops(["runs", text(&clean, "id")])
        .stdout_has(&format!("worktree:  {} (removed)\n", worktree.display()))
        .run();
}

/// Sets the modification time of `dir` to `days` days ago.
fn age(dir: &Path, days: u32) {
    let status = Command::new("touch")
        .args(["-d", &format!("{days} days ago")])
        .arg(dir)
        .status()
        .expect("touch runs");
    assert!(status.success());
}

#[test]
fn gc_removes_an_old_kept_worktree_and_a_dirty_one_only_with_force() {
    if !has_git() {
        return;
    }
    let env = TestEnv::new();
    let repo = repo(&env);
    env.write_script(
        "claude",
        "cat > /dev/null\n[ \"$LOOPS_LOOP_NAME\" = dirty ] && echo wip > wip.txt\necho done",
    );
    create(
        &env,
        "kept",
        &repo,
        &["--worktree", "required", "--keep-worktree"],
    );
    create(&env, "dirty", &repo, &["--worktree", "auto"]);
    create(
        &env,
        "young",
        &repo,
        &["--worktree", "auto", "--keep-worktree"],
    );
    let worktree = |name: &str| {
        env.loops(["run-now", name]).run();
        let path = PathBuf::from(text(&only_run(&env, name), "worktree"));
        assert!(path.exists(), "{name} kept its worktree");
        path
    };
    let (kept, dirty, young) = (worktree("kept"), worktree("dirty"), worktree("young"));
    age(&kept, 40);
    age(&dirty, 40);

    // A dry run says what would go, and removes nothing.
    let dry = env.loops(["--json", "gc"]).run().json();
    let w = &dry["worktrees"];
    assert_eq!((&w["removed"], &w["kept"]), (&1.into(), &1.into()), "{w}");
    assert_eq!(w["items"][0]["path"], kept.display().to_string());
    assert_eq!(w["items"][1]["path"], dirty.display().to_string());
    assert_eq!(
        w["items"][1]["reason"],
        "it has uncommitted changes; --force removes it anyway"
    );
    assert!(kept.exists());

    env.loops(["gc", "--apply"])
        .stdout_has("worktrees: removed 1 and kept 1 of those no run entered for 30 days\n")
        .stdout_has(&format!("  removed {}\n", kept.display()))
        .stdout_has(&format!(
            "  kept {}: it has uncommitted changes; --force removes it anyway\n",
            dirty.display()
        ))
        .run();
    assert!(!kept.exists() && dirty.exists() && young.exists());
    assert!(dirty.join("wip.txt").exists());

    let forced = env
        .loops(["--json", "gc", "--apply", "--force"])
        .run()
        .json();
    assert_eq!(forced["worktrees"]["removed"], 1);
    assert!(!dirty.exists() && young.exists());
    // git forgot them both; the young one stays registered.
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 2, "{listed}");
}

#[test]
fn worktree_flags_on_create_and_edit() {
    let env = TestEnv::new();
    let home = env.home();
    let created = create(&env, "w", &home, &["--worktree", "auto", "--keep-worktree"]);
    assert_eq!(created["target"]["worktree"], "auto");
    assert_eq!(created["target"]["keepWorktree"], true);
    let target = |env: &TestEnv| env.loops(["--json", "show", "w"]).run().json()["target"].clone();
    env.loops(["edit", "w", "--no-keep-worktree"]).run();
    assert_eq!(target(&env).get("keepWorktree"), None);
    env.loops(["edit", "w", "--worktree", "required", "--keep-worktree"])
        .run();
    assert_eq!(target(&env)["worktree"], "required");
    // Off drops the keep with it: nothing is stored for either.
    env.loops(["edit", "w", "--worktree", "off"]).run();
    let now = target(&env);
    assert_eq!((now.get("worktree"), now.get("keepWorktree")), (None, None));

    env.loops([
        "create",
        "agent",
        "bad",
        "--provider",
        "claude",
        "--prompt",
        "p",
    ])
    .args(["--every", "1h", "--worktree", "main"])
    .code(1)
    .stderr_has("--worktree must be off, auto, or required")
    .run();
    env.loops([
        "create",
        "agent",
        "bad",
        "--provider",
        "claude",
        "--prompt",
        "p",
    ])
    .args(["--every", "1h", "--keep-worktree"])
    .code(1)
    .stderr_has(
        "--keep-worktree needs --worktree auto or required: without a worktree there is \
             nothing to keep",
    )
    .run();
    env.loops(["edit", "w", "--keep-worktree"])
        .code(1)
        .stderr_has("--keep-worktree needs --worktree auto or required")
        .run();
    // Agent options only.
    env.create_command("c", "true", &["--every", "1h"]);
    env.loops(["edit", "c", "--worktree", "auto"])
        .code(1)
        .stderr_has("error: --worktree does not apply to c (")
        .run();
}
