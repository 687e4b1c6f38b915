//! `loops restore` (issue 28): a backup comes back in place of the
//! database, by name or path, after the current database is kept as a
//! backup, with the old WAL and shared-memory file gone; it is refused
//! while a daemon runs, without `--yes` off a terminal, for a damaged or
//! foreign backup (the database in place untouched), and on PostgreSQL.
//! A database in place too damaged to copy is moved aside instead.
//! `gc --vacuum` is refused while a daemon runs too.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use loops_tests::{Daemon, TestEnv, sqlite_only};

const WHY: &str = "loops restore puts back a copy of the SQLite file; PostgreSQL has pg_restore";

/// `loops --json backup`: the new backup's path.
fn backup(env: &TestEnv) -> PathBuf {
    let taken = env.loops(["--json", "backup"]).run().json();
    PathBuf::from(taken["path"].as_str().expect("a path"))
}

/// The paths `loops --json backup --list` prints, newest first.
fn listed(env: &TestEnv) -> Vec<PathBuf> {
    let list = env.loops(["--json", "backup", "--list"]).run().json();
    list.as_array()
        .expect("an array")
        .iter()
        .map(|b| PathBuf::from(b["path"].as_str().expect("a path")))
        .collect()
}

/// The loop names `loops --json list` prints, sorted.
fn names(env: &TestEnv) -> Vec<String> {
    let list = env.loops(["--json", "list"]).run().json();
    let mut names: Vec<String> = list
        .as_array()
        .expect("an array")
        .iter()
        .map(|l| l["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// A new environment whose database is a copy of `file`.
fn opened(file: &Path) -> TestEnv {
    let env = TestEnv::new();
    env.make_data_dir();
    std::fs::copy(file, env.db_path()).expect("the file is copied");
    std::fs::set_permissions(env.db_path(), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    env
}

fn companion(env: &TestEnv, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", env.db_path().display()))
}

/// What the data directory holds: each file's name and bytes, the
/// backups included.
fn snapshot(env: &TestEnv) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for dir in [env.data_dir(), env.data_dir().join("backups")] {
        for entry in std::fs::read_dir(dir).expect("a directory") {
            let path = entry.expect("an entry").path();
            if path.is_file() {
                let bytes = std::fs::read(&path).expect("a file");
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_backup_comes_back_and_the_database_it_replaced_is_kept() {
    sqlite_only!(WHY);
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let taken = backup(&env);
    env.create_command("later", "true", &["--every", "1h"]);
    env.loops(["remove", "nightly"]).run();
    assert_eq!(names(&env), ["later"]);
    assert!(companion(&env, "-wal").exists(), "loops leaves its WAL");

    // By the name `backup --list` shows.
    let name = taken.file_name().unwrap().to_str().unwrap().to_owned();
    let ran = env.loops(["--json", "restore", &name, "--yes"]).run();
    // The old WAL and shared-memory file went with the database.
    assert!(!companion(&env, "-wal").exists());
    assert!(!companion(&env, "-shm").exists());
    let out = ran.json();
    assert_eq!(out["restored"], env.db_path().to_str().unwrap());
    assert_eq!(out["from"], taken.to_str().unwrap());
    let kept = PathBuf::from(out["keptCurrentAs"].as_str().expect("a kept backup"));
    assert_eq!(out.as_object().unwrap().len(), 3, "{out}");

    assert_eq!(names(&env), ["nightly"]);
    // The database it replaced is a backup like any other, and holds what
    // the database held.
    assert_eq!(listed(&env), [kept.clone(), taken.clone()]);
    assert_eq!(names(&opened(&kept)), ["later"]);

    // And back again, by path, in human output.
    env.loops(["restore", kept.to_str().unwrap(), "--yes"])
        .stdout_has(&format!(
            "restored {} from {}\n",
            env.db_path().display(),
            kept.display()
        ))
        .stdout_has("kept the database it replaced as ")
        .stdout_has("removed the old database's ")
        .run();
    assert_eq!(names(&env), ["later"]);
}

#[test]
fn without_yes_and_without_a_terminal_nothing_is_restored() {
    sqlite_only!(WHY);
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let taken = backup(&env);
    env.loops(["remove", "nightly"]).run();
    let before = snapshot(&env);
    // The test's stdin is /dev/null.
    let ran = env
        .loops(["restore", taken.to_str().unwrap()])
        .code(1)
        .stderr_has("pass --yes")
        .run();
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert_eq!(snapshot(&env), before);
    assert!(names(&env).is_empty());
}

#[test]
fn restore_and_gc_vacuum_are_refused_while_a_daemon_runs() {
    sqlite_only!(WHY);
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let taken = backup(&env);
    env.loops(["remove", "nightly"]).run();
    let daemon = Daemon::start(&env, &[]);
    let pid = format!("pid {}", daemon.pid);
    env.loops(["restore", taken.to_str().unwrap(), "--yes"])
        .code(1)
        .stderr_has("a daemon is running on this database")
        .stderr_has(&pid)
        .stderr_has("loops daemon stop")
        .run();
    env.loops(["gc", "--apply", "--vacuum"])
        .code(1)
        .stderr_has("a daemon is running on this database")
        .stderr_has("gc --vacuum")
        .run();
    assert!(names(&env).is_empty());
    drop(daemon);
    env.loops(["restore", taken.to_str().unwrap(), "--yes"])
        .run();
    assert_eq!(names(&env), ["nightly"]);
}

#[test]
fn a_damaged_backup_is_refused_and_the_database_is_untouched() {
    sqlite_only!(WHY);
    let env = TestEnv::new();
    for i in 0..40 {
        env.create_command(&format!("job-{i}"), "true", &["--every", "1h"]);
    }
    let taken = backup(&env);
    env.loops(["remove", "job-0"]).run();
    let root: i64 = rusqlite::Connection::open(&taken)
        .and_then(|c| {
            c.query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'loops'",
                [],
                |r| r.get(0),
            )
        })
        .expect("the loops table's root page");
    let files = tempfile::tempdir().unwrap();
    let damaged = files.path().join("damaged.db");
    std::fs::copy(&taken, &damaged).unwrap();
    crate::doctor::scribble_over_page(&damaged, u64::try_from(root).unwrap());
    let before = snapshot(&env);
    env.loops(["restore", damaged.to_str().unwrap(), "--yes"])
        .code(1)
        .stderr_has(&format!(
            "cannot restore {}: it is damaged",
            damaged.display()
        ))
        .stderr_has("the database in place was not changed")
        .run();
    assert_eq!(snapshot(&env), before);
    assert_eq!(names(&env).len(), 39);
}

#[test]
fn a_backup_others_could_write_is_refused() {
    sqlite_only!(WHY);
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let taken = backup(&env);
    let files = tempfile::tempdir().unwrap();
    let open = files.path().join("open.db");
    std::fs::copy(&taken, &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    let before = snapshot(&env);
    env.loops(["restore", open.to_str().unwrap(), "--yes"])
        .code(1)
        .stderr_has("refusing backup")
        .stderr_has("writable by group or others")
        .run();
    assert_eq!(snapshot(&env), before);
    env.loops(["restore", "loops-20000101T000000Z.db", "--yes"])
        .code(1)
        .stderr_has("there is no backup named")
        .stderr_has("loops backup --list")
        .run();
}

#[test]
fn a_database_too_damaged_to_copy_is_moved_aside() {
    sqlite_only!(WHY);
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let taken = backup(&env);
    crate::doctor::scribble_over_page(&env.db_path(), 1);
    let out = env
        .loops(["--json", "restore", taken.to_str().unwrap(), "--yes"])
        .run()
        .json();
    let kept = out["keptCurrentAs"].as_str().expect("a kept file");
    assert!(kept.ends_with("-damaged.db"), "{out}");
    assert!(Path::new(kept).exists());
    assert_eq!(names(&env), ["nightly"]);
    // Not a backup: `backup --list` leaves it out.
    assert_eq!(listed(&env), [taken]);
}

#[test]
fn restore_on_postgresql_points_to_pg_restore() {
    let env = TestEnv::new();
    let ran = env
        .loops([
            "--database-url",
            "postgresql://nobody@127.0.0.1:1/loops",
            "restore",
            "loops-20261201T170512Z.db",
            "--yes",
        ])
        .code(1)
        .stderr_has("for the embedded SQLite database")
        .stderr_has("pg_restore")
        .run();
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
}
