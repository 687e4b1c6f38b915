//! Issue 16 §2 and §5: where a loop runs (`create` records its directory),
//! `loops edit`, `loops rename`, shared names, and `workflows create
//! --replace`.

use std::path::Path;
use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};

fn show(env: &TestEnv, target: &str) -> serde_json::Value {
    env.loops(["show", target]).run().json()
}

/// `loops <args>` run in `dir`, which must succeed.
fn loops_in(env: &TestEnv, dir: &Path, args: &[&str]) -> std::process::Output {
    let out = env
        .cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("loops runs");
    assert!(
        out.status.success(),
        "{args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A project directory with an executable `./build.sh` that records a
/// line in `built.log` of the directory it runs in.
fn project(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.home().join("project");
    std::fs::create_dir_all(&dir).expect("the project directory");
    let script = dir.join("build.sh");
    std::fs::write(&script, "#!/bin/sh\necho built >> built.log\n").expect("the script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .expect("an executable script");
    dir
}

fn built(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("built.log"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_loop_runs_in_the_directory_it_was_created_in_from_anywhere() {
    let env = TestEnv::new();
    let dir = project(&env);
    let elsewhere = env.home().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = loops_in(
        &env,
        &dir,
        &[
            "--json",
            "create",
            "command",
            "build",
            "--cmd",
            "./build.sh",
            "--every",
            "1s",
        ],
    );
    let lp: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = lp["id"].as_str().unwrap().to_owned();
    assert_eq!(lp["target"]["cwd"], dir.to_str().unwrap());

    // run-now from another directory.
    let ran = loops_in(&env, &elsewhere, &["run-now", &id]);
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains(" succeeded"),
        "{ran:?}"
    );
    assert_eq!(built(&dir), 1);
    assert!(!elsewhere.join("built.log").exists());

    // The daemon, started from yet another directory, runs it there too.
    let _daemon = Daemon::start(&env, &[]);
    wait_for("the daemon's run", Duration::from_secs(30), || {
        (built(&dir) >= 2).then_some(())
    });
    let runs = env.loops(["--json", "runs", &id]).run().json();
    let runs = runs.as_array().unwrap();
    // A 1s loop may have its next run in flight by now.
    let ended: Vec<_> = runs.iter().filter(|r| r["status"] != "running").collect();
    assert!(ended.len() >= 2, "{runs:#?}");
    assert!(
        ended.iter().all(|r| r["status"] == "succeeded"),
        "{runs:#?}"
    );
}

#[test]
fn cwd_expands_home_makes_relative_paths_absolute_and_warns_when_missing() {
    let env = TestEnv::new();
    let dir = project(&env);
    let create = |args: &[&str]| {
        let out = loops_in(&env, &dir, args);
        let lp: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (lp, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let home = env.home();
    let (lp, warned) = create(&[
        "--json", "create", "command", "a", "--cmd", "true", "--every", "1h", "--cwd", "~",
    ]);
    assert_eq!(lp["target"]["cwd"], home.to_str().unwrap());
    assert!(warned.is_empty(), "{warned}");
    // The provider's program is there: only the directory is warned about.
    env.write_script("claude", "cat > /dev/null");
    let (lp, warned) = create(&[
        "--json",
        "create",
        "agent",
        "b",
        "--provider",
        "claude",
        "--prompt",
        "hi",
        "--every",
        "1h",
        "--cwd",
        "./later",
    ]);
    let later = dir.join("later");
    assert_eq!(lp["target"]["cwd"], later.to_str().unwrap());
    assert_eq!(
        warned,
        format!(
            "warning: the working directory {} does not exist (yet); runs of this loop fail \
             until it does\n",
            later.display()
        )
    );
    // A workflow loop has no directory of its own.
    let ran = env
        .loops([
            "create",
            "workflow",
            "c",
            "--workflow",
            "x",
            "--every",
            "1h",
            "--cwd",
            "/",
        ])
        .code(2)
        .run();
    assert!(ran.stderr.contains("--cwd"), "{}", ran.stderr);
}

#[test]
fn edit_changes_only_what_is_given_and_keeps_the_id_and_history() {
    let env = TestEnv::new();
    let id = env.create_command("nightly", "true", &["--every", "1h", "--attempts", "2"]);
    env.loops(["run-now", &id]).run();
    let before = show(&env, &id);

    let ran = env
        .loops([
            "edit",
            "nightly",
            "--every",
            "2h",
            "--timeout",
            "10m",
            "--cmd",
            "echo hi",
        ])
        .run();
    let line = ran.stdout.trim_end();
    assert!(
        line.starts_with(&format!(
            "edited {id} (nightly): schedule, command, timeout; next "
        )),
        "{line}"
    );
    let after = show(&env, &id);
    assert_eq!(after["schedule"]["everyMs"], 7_200_000);
    assert_eq!(after["target"]["command"], "echo hi");
    assert_eq!(after["target"]["timeoutMs"], 600_000);
    assert_eq!(after["target"]["cwd"], before["target"]["cwd"]);
    for kept in [
        "id",
        "createdAt",
        "status",
        "maxAttempts",
        "leaseMs",
        "name",
    ] {
        assert_eq!(after[kept], before[kept], "{kept}");
    }
    assert_ne!(
        after["nextRunAt"], before["nextRunAt"],
        "a new schedule, a new next run"
    );
    let runs = env.loops(["--json", "runs", &id]).run().json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "the history stays");

    // --json prints the loop as show does; clearing values.
    let edited = env
        .loops([
            "--json",
            "edit",
            &id,
            "-d",
            "nightly build",
            "--expires-at",
            "2099-01-01",
        ])
        .run()
        .json();
    assert_eq!(edited, show(&env, &id));
    assert_eq!(edited["expiresAt"], "2099-01-01T00:00:00.000Z");
    let edited = env
        .loops(["--json", "edit", &id, "-d", "", "--expires-at", "never"])
        .run()
        .json();
    assert!(edited.get("description").is_none(), "{edited}");
    assert!(edited.get("expiresAt").is_none(), "{edited}");
    assert_eq!(
        edited["nextRunAt"], after["nextRunAt"],
        "no new schedule, same next run"
    );
}

#[test]
fn edit_refuses_what_create_refuses_and_flags_of_another_target() {
    let env = TestEnv::new();
    let id = env.create_command("c", "true", &["--every", "1h"]);
    let before = show(&env, &id);
    let refused = |args: &[&str], message: &str| {
        let ran = env.loops(["edit", &id]).args(args).code(1).run();
        assert_eq!(
            ran.stderr.lines().next(),
            Some(format!("error: {message}").as_str()),
            "{args:?}"
        );
        assert!(ran.stdout.is_empty());
    };
    refused(
        &["--attempts", "0"],
        "--attempts must be a positive integer",
    );
    refused(
        &["--every", "1h", "--cron", "* * * * *"],
        "choose exactly one schedule: --at, --every, --cron, or --dynamic",
    );
    refused(
        &["--overlap", "sometimes"],
        "--overlap must be skip or allow",
    );
    refused(
        &["--prompt", "hi", "--model", "m"],
        &format!(
            "--prompt, --model do not apply to c ({id}), a command loop; a command loop takes \
             --cmd, --arg, --no-args, --shell, --no-shell, --env, --no-env, --cwd, --timeout, \
             --account, --account-tool"
        ),
    );
    refused(
        &["--tz", "Europe/Berlin"],
        "--tz requires a cron schedule: this loop's schedule is an interval (--every); give \
         --cron with it",
    );
    let ran = env.loops(["edit", &id]).code(1).run();
    assert!(
        ran.stderr
            .starts_with("error: nothing to change: give at least one of --at"),
        "{}",
        ran.stderr
    );
    env.loops(["edit", "nope", "--every", "1m"])
        .code(1)
        .stderr_has("loop not found: nope")
        .run();
    assert_eq!(show(&env, &id), before, "nothing was written");
}

#[test]
fn edit_refuses_an_agent_option_value_that_reads_as_an_option() {
    // Issue 25 item 8, as create refuses it.
    let env = TestEnv::new();
    let lp = env
        .loops(["--json", "create", "agent", "a", "--provider", "codex"])
        .args(["--prompt", "fix it", "--model", "o4", "--every", "1h"])
        .run()
        .json();
    let id = lp["id"].as_str().expect("an id").to_owned();
    let before = show(&env, &id);
    for flag in ["--model", "--agent"] {
        let ran = env
            .loops(["edit", &id])
            .args([format!("{flag}=--dangerously-bypass-approvals-and-sandbox")])
            .code(1)
            .run();
        let expected = format!(
            "error: {flag} must not begin with \"-\": the agent would read it as an option, not \
             as the value of {flag};"
        );
        assert!(ran.stderr.starts_with(&expected), "{}", ran.stderr);
    }
    assert_eq!(show(&env, &id), before, "nothing was written");
}

#[test]
fn a_paused_loop_stays_paused_and_a_cron_zone_changes_alone() {
    let env = TestEnv::new();
    let id = env.create_command("z", "true", &["--cron", "0 9 * * *", "--tz", "UTC"]);
    env.loops(["pause", &id]).run();
    env.loops(["edit", &id, "--tz", "Asia/Tokyo"]).run();
    let lp = show(&env, &id);
    assert_eq!(lp["status"], "paused");
    assert_eq!(lp["schedule"]["expression"], "0 9 * * *");
    assert_eq!(lp["schedule"]["timezone"], "Asia/Tokyo");
    assert!(
        lp["nextRunAt"]
            .as_str()
            .unwrap()
            .ends_with("T00:00:00.000Z"),
        "{lp}"
    );
}

#[test]
fn rename_and_shared_names() {
    let env = TestEnv::new();
    let first = env.create_command("twin", "true", &["--every", "1h"]);
    let ran = env
        .loops([
            "create", "command", "twin", "--cmd", "true", "--every", "1h",
        ])
        .run();
    assert!(
        ran.stderr
            .starts_with("warning: 2 loops are now named \"twin\"; commands given this name"),
        "{}",
        ran.stderr
    );
    env.loops(["rename", &first, "elder"])
        .stdout(&format!("renamed {first} twin → elder\n"))
        .run();
    assert_eq!(show(&env, "elder")["id"], first.as_str());
    let renamed = env
        .loops(["--json", "rename", "elder", "eldest"])
        .run()
        .json();
    assert_eq!(renamed["name"], "eldest");
    assert_eq!(renamed, show(&env, &first));
    env.loops(["rename", &first, " "]).code(1).run();
}

#[test]
fn workflows_create_replace_archives_the_old_one_and_moves_its_loops() {
    let env = TestEnv::new();
    let file = env.home().join("wf.json");
    let write = |command: &str| {
        std::fs::write(
            &file,
            format!(
                r#"{{"name":"build","steps":[{{"id":"a","target":{{"type":"command","command":"{command}"}}}}]}}"#
            ),
        )
        .unwrap();
    };
    let file_arg = file.to_str().unwrap();
    write("true");
    let old = env
        .loops(["--json", "workflows", "create", file_arg])
        .run()
        .json();
    let old_id = old["id"].as_str().unwrap().to_owned();
    let lp = env
        .loops([
            "--json",
            "create",
            "workflow",
            "w",
            "--workflow",
            "build",
            "--every",
            "1h",
        ])
        .run()
        .json();
    let loop_id = lp["id"].as_str().unwrap().to_owned();
    env.loops(["workflows", "run", "build"]).run();

    write("false");
    env.loops(["workflows", "create", file_arg])
        .code(1)
        .stderr_has("--replace")
        .run();
    let ran = env
        .loops(["workflows", "create", file_arg, "--replace"])
        .run();
    let new_id = env.loops(["workflows", "show", "build"]).run().json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_id, old_id);
    assert_eq!(
        ran.stdout,
        format!(
            "replaced workflow {old_id} (build) with {new_id} steps=1; {old_id} is archived \
             with its runs; 1 loop now runs the new one: {loop_id}\n"
        )
    );
    assert_eq!(
        env.loops(["workflows", "show", &old_id]).run().json()["status"],
        "archived"
    );
    assert_eq!(
        show(&env, &loop_id)["target"]["workflowId"],
        new_id.as_str()
    );
    let runs = env
        .loops(["--json", "workflows", "runs", &old_id])
        .run()
        .json();
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "the old runs stay: {runs}"
    );
}
