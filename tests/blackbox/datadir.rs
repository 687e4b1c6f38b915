//! A data directory no one else can subvert (issue 12 §3): loops refuses,
//! with a message that says how to fix it, a data directory or database
//! another user owns or can write, and never follows a symbolic link at
//! `loops.db`. A data directory readable by others, or one reached through
//! a symbolic link, works as before.

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use loops_tests::{TestEnv, sqlite_only};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("a file to inspect")
        .permissions()
        .mode()
        & 0o7777
}

/// `env` with a database holding one loop.
fn with_a_loop() -> TestEnv {
    let env = TestEnv::new();
    env.create_command("kept", "true", &["--every", "1h"]);
    env
}

#[test]
fn a_data_dir_writable_by_others_is_refused_with_the_fix() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let env = with_a_loop();
    let data = env.data_dir();
    chmod(&data, 0o777);
    let ran = env.loops(["list"]).code(1).run();
    let first = ran.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: ")
            && first.contains(&format!("refusing data directory {}", data.display()))
            && first.contains("writable by group or others (mode 0777)")
            && first.ends_with(&format!("run chmod 700 {}", data.display())),
        "{}",
        ran.stderr
    );
    assert!(ran.stdout.is_empty());
    assert_eq!(mode(&data), 0o777, "loops changed the directory's mode");

    // Following the advice is enough.
    chmod(&data, 0o700);
    env.loops(["list"]).stdout_has("kept").run();
}

#[test]
fn a_database_writable_by_others_is_refused() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let env = with_a_loop();
    chmod(&env.db_path(), 0o666);
    env.loops(["show", "kept"])
        .code(1)
        .stderr_has(&format!("refusing database {}", env.db_path().display()))
        .stderr_has(&format!("chmod 600 {}", env.db_path().display()))
        .run();
    assert_eq!(mode(&env.db_path()), 0o666);
}

#[test]
fn a_planted_database_link_is_refused_and_its_target_keeps_its_mode() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let env = TestEnv::new();
    let data = env.data_dir();
    std::fs::create_dir(&data).unwrap();
    chmod(&data, 0o700);
    let victim = env.home().join("victim");
    std::fs::write(&victim, "someone's file").unwrap();
    chmod(&victim, 0o644);
    symlink(&victim, env.db_path()).unwrap();
    env.loops(["create", "command", "x", "--cmd", "true", "--every", "1h"])
        .code(1)
        .stderr_has("is a symbolic link")
        .run();
    assert_eq!(mode(&victim), 0o644, "loops changed the link's target");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "someone's file");
}

#[test]
fn a_data_dir_of_another_user_is_refused() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let uid = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
    if uid != 0 {
        eprintln!("a_data_dir_of_another_user_is_refused: skipped: needs root to chown");
        return;
    }
    let env = with_a_loop();
    std::os::unix::fs::chown(env.data_dir(), Some(4242), None).unwrap();
    env.loops(["list"])
        .code(1)
        .stderr_has("owned by uid 4242, not by uid 0 that runs loops")
        .run();
}

#[test]
fn a_data_dir_reached_through_a_link_or_readable_by_others_works() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let env = TestEnv::new();
    let real = env.home().join("elsewhere");
    std::fs::create_dir(&real).unwrap();
    chmod(&real, 0o755);
    symlink(&real, env.data_dir()).unwrap();
    env.create_command("through-link", "true", &["--every", "1h"]);
    assert!(real.join("loops.db").is_file());
    assert_eq!(mode(&real.join("loops.db")), 0o600);
    env.loops(["list"]).stdout_has("through-link").run();
}

#[test]
fn daemon_stop_in_a_data_dir_others_can_write_signals_nothing() {
    let env = with_a_loop();
    // The data directory holds the pid file on either backend (on SQLite
    // the create above made it already).
    env.make_data_dir();
    // A process of ours that a planted pid file names.
    let mut victim = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .expect("sleep");
    std::fs::write(
        env.data_dir().join("daemon.pid"),
        format!("{}\n", victim.id()),
    )
    .expect("a planted pid file");
    chmod(&env.data_dir(), 0o777);
    env.loops(["daemon", "stop"])
        .code(1)
        .stderr_has("refusing data directory")
        .run();
    let alive = victim.try_wait().expect("the victim's status").is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        alive,
        "daemon stop signalled the process a planted pid file named"
    );
}
