//! Issue 25 §9: with `.` or an empty entry on PATH, `doctor` ran
//! `./accounts --version` from the current directory. Loops drops relative
//! and empty PATH entries from the PATH it probes with and gives to runs,
//! and `doctor`'s `path` check names them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use loops_tests::TestEnv;
use serde_json::Value;

/// `loops <args>` in `dir` with `PATH=<path>`.
fn loops_in(env: &TestEnv, dir: &Path, path: &str, args: &[&str]) -> std::process::Output {
    env.cmd()
        .current_dir(dir)
        .env("PATH", path)
        .args(args)
        .output()
        .expect("loops runs")
}

/// The program the loop runs: a name no system has on its PATH, so the
/// run fails only because loops dropped `.` (a real `accounts` in
/// `/usr/bin` would make the run succeed on that machine).
const PLANTED: &str = "loops-planted-9f3";

/// Writes `dir/name`, an executable that touches `marker` and prints
/// `planted 6.6.6`.
fn plant(dir: &Path, name: &str, marker: &Path) {
    let planted = dir.join(name);
    std::fs::write(
        &planted,
        format!(
            "#!/bin/sh\ntouch '{}'\necho planted 6.6.6\n",
            marker.display()
        ),
    )
    .expect("a planted program");
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755))
        .expect("an executable planted program");
}

#[test]
fn programs_in_the_current_directory_never_run_through_path() {
    let env = TestEnv::new();
    let here = env.home().join("here");
    std::fs::create_dir_all(&here).unwrap();
    // `doctor` probes `accounts --version`: its marker shows whether the
    // planted one ran. The loop runs a program of its own.
    let accounts_ran = env.home().join("planted-accounts-ran");
    plant(&here, "accounts", &accounts_ran);
    let planted_ran = env.home().join("planted-program-ran");
    plant(&here, PLANTED, &planted_ran);
    env.loops([
        "create", "command", "probe", "--cmd", PLANTED, "--every", "1h",
    ])
    .args(["--cwd", here.to_str().unwrap()])
    .run();

    let bin = env.bin_dir().display().to_string();
    for (path, dropped) in [
        (format!(".:{bin}:/usr/bin:/bin"), r#"".""#),
        (format!("{bin}::/usr/bin:/bin"), r#""""#),
        (format!(":{bin}:/usr/bin:/bin"), r#""""#),
        (format!("{bin}:/usr/bin:/bin:"), r#""""#),
        (format!("{bin}:./:/usr/bin:/bin"), r#""./""#),
    ] {
        let ran = loops_in(&env, &here, &path, &["--json", "doctor"]);
        let report: Value = serde_json::from_slice(&ran.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&ran.stderr)));
        assert!(
            !accounts_ran.exists(),
            "doctor ran ./accounts with PATH={path}"
        );
        let check = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "path")
            .unwrap()
            .clone();
        assert_eq!(check["status"], "warn", "{check}");
        let message = check["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "dropped the relative or empty PATH entries {dropped}"
            )),
            "{message}"
        );
        let detail = check["detail"].as_str().unwrap();
        assert!(detail.split(':').all(|p| p.starts_with('/')), "{detail}");
        let accounts = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "accounts")
            .unwrap();
        assert_ne!(accounts["detail"], "planted 6.6.6", "{accounts}");

        let ran = loops_in(&env, &here, &path, &["--json", "run-now", "probe"]);
        assert!(
            !planted_ran.exists(),
            "run-now ran ./{PLANTED} with PATH={path}"
        );
        let run: Value = serde_json::from_slice(&ran.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&ran.stderr)));
        // Not found: by loops, or by the shell that runs the command.
        assert_eq!(run["status"], "failed", "{run}");
    }

    // The control: named by a path, the planted program does run, so the
    // checks above would have seen it.
    let ran = loops_in(&env, &here, "/usr/bin:/bin", &["run-now", "probe"]);
    assert!(!ran.status.success());
    let by_path = format!("./{PLANTED}");
    env.loops(["edit", "probe", "--cmd", &by_path]).run();
    let ran = loops_in(&env, &here, "/usr/bin:/bin", &["run-now", "probe"]);
    assert!(ran.status.success(), "{ran:?}");
    assert!(planted_ran.exists(), "./{PLANTED} never ran");
    // And doctor runs an `accounts` its PATH names by an absolute path.
    let path = format!("{}:/usr/bin:/bin", here.display());
    loops_in(&env, &here, &path, &["doctor"]);
    assert!(accounts_ran.exists(), "doctor never probed accounts");
}
