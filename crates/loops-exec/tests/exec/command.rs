//! Command targets: shell and argv, exit codes, env, cwd, the executable
//! check and spawn reporting (SPEC §5.1, §5.6, §5.7).

use std::collections::BTreeMap;

use loops_core::{AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget};
use loops_exec::{
    CancelToken, Preflight, RunContext, RunMetadata, normalize_path, preflight_target,
};

use crate::support::*;

#[test]
fn shell_printf_hello_succeeds() {
    // SPEC §10 item 54.
    let fx = Fixture::new();
    let r = run(&shell("printf hello"), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(r.stdout, "hello");
    assert_eq!(r.stderr, "");
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.error, None);
    assert!(r.pid.is_some());
    assert!(r.finished_at >= r.started_at);
}

#[test]
fn shell_args_are_joined_unquoted() {
    let fx = Fixture::new();
    let mut target = shell("printf");
    if let ProcessTarget::Command(c) = &mut target {
        c.args = Some(vec!["'%s-'".into(), "a".into(), "b".into()]);
    }
    assert_eq!(run(&target, &fx.opts()).stdout, "a-b-");
}

#[test]
fn argv_targets_get_their_args_verbatim() {
    let fx = Fixture::new();
    fx.fake("show-args", r#"for a in "$@"; do printf '[%s]' "$a"; done"#);
    let r = run(&command("show-args", &["a b", "$HOME", "*"]), &fx.opts());
    assert_eq!(r.stdout, "[a b][$HOME][*]");
}

#[test]
fn a_missing_binary_fails_without_spawning() {
    // SPEC §10 item 55.
    let fx = Fixture::new();
    let r = run(&command("loops-no-such-binary", &[]), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some(
            format!(
                "Executable not found in PATH: loops-no-such-binary. Effective PATH={}",
                normalize_path(&fx.env())
            )
            .as_str()
        )
    );
    assert_eq!((r.pid, r.exit_code, r.duration_ms), (None, None, 0));
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
    assert!(
        preflight_err(&command("loops-no-such-binary", &[]), &fx.opts())
            .starts_with("Executable not found in PATH: loops-no-such-binary. Effective PATH=")
    );
}

#[test]
fn a_binary_in_home_local_bin_is_found_with_a_minimal_path() {
    // SPEC §10 item 56.
    let fx = Fixture::new();
    fx.script("home/.local/bin/my-tool", "echo found");
    let env = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), fx.home().display().to_string()),
    ]);
    let opts = fx.opts_with(env);
    let r = run(&command("my-tool", &[]), &opts);
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(r.stdout, "found\n");
    let r = run(&shell("printf %s \"$PATH\""), &opts);
    assert!(
        r.stdout.starts_with(&format!(
            "/usr/bin:/bin:{}/.local/bin:",
            fx.home().display()
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn exit_code_3_fails_with_its_code() {
    // SPEC §10 item 67.
    let fx = Fixture::new();
    let r = run(&shell("echo partial; exit 3"), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("process exited with code 3"));
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.stdout, "partial\n");
}

/// Set in the child run of [`stdin_is_empty`]: the file it creates once
/// its check passed.
const STDIN_CHILD: &str = "LOOPS_TEST_STDIN_CHILD_DONE";

#[test]
fn stdin_is_empty() {
    // SPEC §10 item 71: `cat` sees EOF at once, even when the runner's own
    // stdin is a pipe that is open and holds data: this test runs itself
    // again in a child process whose stdin is such a pipe, so a child that
    // inherited the runner's stdin would print the data and then block.
    if let Some(done) = std::env::var_os(STDIN_CHILD) {
        let fd0 = std::fs::read_link("/proc/self/fd/0").unwrap();
        assert!(
            fd0.to_string_lossy().starts_with("pipe:"),
            "the runner's stdin is {fd0:?}, not the pipe"
        );
        let fx = Fixture::new();
        let r = run(&with_timeout(command("cat", &[]), 5_000), &fx.opts());
        assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
        assert_eq!(r.stdout, "");
        std::fs::write(done, "ok").unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "command::stdin_is_empty", "--test-threads=1"])
        .env(STDIN_CHILD, &done)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"the runner's own input\n").unwrap();
    // The write end stays open until the child is done.
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(status.success(), "the child run failed: {status}");
    assert!(done.exists(), "the child run did not run the check");
}

#[test]
fn the_child_leads_its_own_process_group() {
    // SPEC §10 item 71. The fake is exec'd directly, so `$$` is the pid the
    // executor reports; field 5 of /proc/<pid>/stat is the group.
    let fx = Fixture::new();
    fx.fake(
        "whoami-group",
        r#"echo "$$ $(cut -d' ' -f5 /proc/$$/stat)""#,
    );
    let (result, spawned) = run_full(
        &command("whoami-group", &[]),
        &RunMetadata::default(),
        &fx.opts(),
    );
    let r = result.unwrap();
    let pid = r.pid.unwrap();
    assert_eq!(r.stdout, format!("{pid} {pid}\n"));
    assert_ne!(pid, std::process::id());
    // on_spawn reported the identity, start time included.
    let spawned = spawned.unwrap();
    assert_eq!(spawned.pid, pid);
    assert!(spawned.start.is_some());
}

#[test]
fn the_environment_is_exactly_the_built_one() {
    let fx = Fixture::new();
    let mut target = shell("env");
    if let ProcessTarget::Command(c) = &mut target {
        c.env = Some(BTreeMap::from([("FOO".to_owned(), "bar".to_owned())]));
    }
    let r = run(&target, &fx.opts());
    let keys: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    assert!(keys.contains(&"FOO") && r.stdout.contains("FOO=bar\n"));
    for key in keys {
        // `sh` itself may add PWD (and, for some shells, SHLVL and _);
        // loops adds the spawn cookie.
        assert!(
            [
                "PATH",
                "HOME",
                "MARKERS",
                "FOO",
                "PWD",
                "OLDPWD",
                "SHLVL",
                "_",
                "LOOPS_SPAWN_ID"
            ]
            .contains(&key),
            "the child inherited {key} from the test process"
        );
    }
}

#[test]
fn loops_metadata_reaches_the_child() {
    // SPEC §10 item 66.
    let fx = Fixture::new();
    let meta = RunMetadata {
        loop_id: Some("0123456789ab".into()),
        loop_name: Some("nightly".into()),
        run_id: Some("ba9876543210".into()),
        scheduled_for: Some("2026-01-01T00:15:00Z".parse().unwrap()),
        workflow_id: Some("aaaaaaaaaaaa".into()),
        workflow_name: Some("wf".into()),
        workflow_run_id: Some("bbbbbbbbbbbb".into()),
        workflow_step_id: Some("build".into()),
    };
    // The spawn cookie differs per spawn; it is tested in supervise.rs.
    let mut target = shell("env | grep '^LOOPS_' | grep -v '^LOOPS_SPAWN_ID=' | sort");
    if let ProcessTarget::Command(c) = &mut target {
        // Metadata overrides anything set earlier.
        c.env = Some(BTreeMap::from([(
            "LOOPS_RUN_ID".to_owned(),
            "forged".to_owned(),
        )]));
    }
    let r = run_full(&target, &meta, &fx.opts()).0.unwrap();
    assert_eq!(
        r.stdout,
        "LOOPS_LOOP_ID=0123456789ab\nLOOPS_LOOP_NAME=nightly\nLOOPS_RUN_ID=ba9876543210\n\
         LOOPS_SCHEDULED_FOR=2026-01-01T00:15:00.000Z\nLOOPS_WORKFLOW_ID=aaaaaaaaaaaa\n\
         LOOPS_WORKFLOW_NAME=wf\nLOOPS_WORKFLOW_RUN_ID=bbbbbbbbbbbb\nLOOPS_WORKFLOW_STEP_ID=build\n"
    );
}

#[test]
fn a_relative_program_is_resolved_against_the_target_cwd() {
    // SPEC §9 item 29: the original looked in the loops process's cwd.
    let fx = Fixture::new();
    fx.script("work/tools/run.sh", "pwd");
    let work = fx.path_str("work");
    let target = with_cwd(command("./tools/run.sh", &[]), &work);
    let r = run(&target, &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(
        r.stdout.trim_end(),
        std::fs::canonicalize(&work).unwrap().to_str().unwrap()
    );
    let p = preflight_target(&target, &RunMetadata::default(), &fx.opts()).unwrap();
    assert_eq!(p.command, "./tools/run.sh");
    // Without the cwd, the same name does not resolve.
    let r = run(&command("./tools/run.sh", &[]), &fx.opts());
    assert!(
        r.error
            .unwrap()
            .starts_with("Executable not found in PATH: ./tools/run.sh.")
    );
}

#[test]
fn a_missing_cwd_is_named_in_the_error() {
    // SPEC §9 item 29: no opaque spawn error.
    let fx = Fixture::new();
    let missing = fx.path_str("no/such/dir");
    for target in [shell("true"), command("true", &[])] {
        let target = with_cwd(target, &missing);
        let r = run(&target, &fx.opts());
        assert_eq!(r.status, ExecutorStatus::Failed);
        assert_eq!(
            r.error,
            Some(format!("working directory does not exist: {missing}"))
        );
        assert_eq!((r.pid, r.duration_ms), (None, 0));
        assert_eq!(
            preflight_err(&target, &fx.opts()),
            format!("working directory does not exist: {missing}")
        );
    }
    let file = fx.path_str("bin");
    std::fs::write(fx.path("plain"), "").unwrap();
    let plain = fx.path_str("plain");
    let r = run(&with_cwd(shell("true"), &plain), &fx.opts());
    assert_eq!(
        r.error,
        Some(format!("working directory is not a directory: {plain}"))
    );
    assert_eq!(
        run(&with_cwd(shell("true"), &file), &fx.opts()).status,
        ExecutorStatus::Succeeded
    );
}

#[test]
fn an_unenterable_cwd_is_named_in_the_error() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(str::to_owned));
    if euid.is_none_or(|e| e == "0") {
        // Root enters any directory; the check cannot fail.
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let locked = fx.path("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let r = run(
        &with_cwd(shell("true"), locked.to_str().unwrap()),
        &fx.opts(),
    );
    assert!(r.error.unwrap().starts_with(&format!(
        "working directory is not accessible: {}",
        locked.display()
    )));
}

#[test]
fn a_spawn_failure_names_the_program_and_cwd() {
    let fx = Fixture::new();
    // Executable, but its interpreter does not exist: exec itself fails.
    fx.script("bin/broken", "true");
    std::fs::write(fx.path("bin/broken"), "#!/no/such/interpreter\n").unwrap();
    let work = fx.path_str("bin");
    let r = run(&with_cwd(command("broken", &[]), &work), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert_eq!(r.pid, None);
    let error = r.error.unwrap();
    assert!(
        error.starts_with(&format!("failed to spawn broken in {work}: ")),
        "{error}"
    );
}

#[test]
fn preflight_checks_without_spawning() {
    let fx = Fixture::new();
    fx.fake("claude", r#"touch "$MARKERS/ran""#);
    let target = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, "hi"));
    let p = preflight_target(&target, &RunMetadata::default(), &fx.opts()).unwrap();
    assert_eq!(
        p,
        Preflight {
            command: "claude".into(),
            account_profile: None,
            account_tool: Some("claude".into()),
        }
    );
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        serde_json::json!({"command": "claude", "accountTool": "claude"})
    );
    // Shell targets skip the executable check.
    let p = preflight_target(
        &shell("no-such-thing --flag"),
        &RunMetadata::default(),
        &fx.opts(),
    )
    .unwrap();
    assert_eq!(p.command, "no-such-thing --flag");
    assert!(!fx.path("ran").exists());
}

#[test]
fn a_token_cancelled_before_the_start_spawns_nothing() {
    let fx = Fixture::new();
    let token = CancelToken::new();
    token.cancel("daemon stopping");
    let ctx = RunContext {
        cancel: Some(&token),
        ..RunContext::default()
    };
    let (result, spawned) = run_in(
        &shell(r#"touch "$MARKERS/ran""#),
        &RunMetadata::default(),
        &fx.opts(),
        &ctx,
    );
    let r = result.unwrap();
    assert_eq!(spawned, None);
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("daemon stopping"));
    assert!(!fx.path("ran").exists());
}

#[test]
fn instants_come_from_the_injected_clock() {
    let fx = Fixture::new();
    let fixed: loops_core::Timestamp = "2030-05-05T05:05:05Z".parse().unwrap();
    let clock = loops_core::ManualClock::new(fixed);
    let ctx = RunContext {
        clock: &clock,
        ..RunContext::default()
    };
    let r = run_in(&shell("true"), &RunMetadata::default(), &fx.opts(), &ctx)
        .0
        .unwrap();
    assert_eq!(r.started_at, fixed);
    assert_eq!(r.finished_at, fixed);
}

#[test]
fn the_run_spawn_id_sits_between_the_inherited_ids_and_the_cookie() {
    let fx = Fixture::new();
    let mut env = fx.env();
    env.insert("LOOPS_SPAWN_ID".to_owned(), "1-outer-0".to_owned());
    let ctx = RunContext {
        spawn_id: Some("2-run-0"),
        ..RunContext::default()
    };
    let r = run_in(
        &shell("printf %s \"$LOOPS_SPAWN_ID\""),
        &RunMetadata::default(),
        &fx.opts_with(env),
        &ctx,
    )
    .0
    .unwrap();
    let ids: Vec<&str> = r.stdout.split(' ').collect();
    assert_eq!(ids.len(), 3, "{}", r.stdout);
    assert_eq!(ids[..2], ["1-outer-0", "2-run-0"]);
    assert!(ids[2].starts_with(&format!("{}-", std::process::id())));
}
