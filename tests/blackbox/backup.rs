//! `loops backup` and the automatic backups (issue 14): a backup is a
//! private, consistent copy that opens as a data directory of its own;
//! `--keep` keeps the newest; `--list` lists them newest first; a busy
//! daemon never makes one fail; a database whose schema a migration is
//! about to change is backed up first, once; and `doctor` names the newest
//! backup of a damaged database.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use loops_tests::{Daemon, ORIGINAL_LOOP, Ran, TestEnv, sqlite_only, wait_for};

const DEADLINE: Duration = Duration::from_secs(20);

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("the file exists")
        .permissions()
        .mode()
        & 0o777
}

fn backups_dir(env: &TestEnv) -> PathBuf {
    env.data_dir().join("backups")
}

/// `loops --json backup <args>`: the new backup's path.
fn backup(env: &TestEnv, args: &[&str]) -> PathBuf {
    let taken = env.loops(["--json", "backup"]).args(args).run().json();
    PathBuf::from(taken["path"].as_str().expect("a path"))
}

/// The paths `loops --json backup --list` prints, in its order.
fn listed(env: &TestEnv) -> Vec<PathBuf> {
    let list = env.loops(["--json", "backup", "--list"]).run().json();
    list.as_array()
        .expect("an array")
        .iter()
        .map(|b| PathBuf::from(b["path"].as_str().expect("a path")))
        .collect()
}

/// A new environment whose database is a copy of the backup `file`.
fn restored(file: &Path) -> TestEnv {
    let env = TestEnv::new();
    env.make_data_dir();
    std::fs::copy(file, env.db_path()).expect("the backup is copied");
    std::fs::set_permissions(env.db_path(), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    env
}

/// The ids of `loops --json <args>`'s array, sorted.
fn ids(env: &TestEnv, args: &[&str]) -> Vec<String> {
    let json = env.loops(["--json"]).args(args).run().json();
    let mut ids: Vec<String> = json
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v["id"].as_str().expect("an id").to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_backup_opens_with_the_same_loops_and_runs() {
    sqlite_only!(
        "loops backup copies the SQLite file (VACUUM INTO); PostgreSQL is backed up with pg_dump"
    );
    let env = TestEnv::new();
    env.create_command("first", "printf one", &["--every", "1h"]);
    env.create_command("second", "true", &["--every", "1h"]);
    env.loops(["run-now", "first"]).run();
    env.loops(["run-now", "second"]).run();

    let ran = env.loops(["backup"]).run();
    let line = ran.stdout.trim();
    assert!(
        line.starts_with(&format!(
            "backed up to {}/loops-",
            backups_dir(&env).display()
        )) && line.ends_with(" KiB)"),
        "{line}"
    );
    let file = PathBuf::from(
        line.strip_prefix("backed up to ")
            .and_then(|l| l.split(" (").next())
            .unwrap(),
    );
    let copy = restored(&file);
    assert_eq!(ids(&copy, &["list"]), ids(&env, &["list"]));
    assert_eq!(ids(&copy, &["runs"]), ids(&env, &["runs"]));
    assert_eq!(ids(&copy, &["runs"]).len(), 2);

    let taken = env.loops(["--json", "backup"]).run().json();
    let path = taken["path"].as_str().unwrap();
    assert_eq!(
        Some(std::fs::metadata(path).unwrap().len()),
        taken["sizeBytes"].as_u64()
    );
    assert!(
        taken["takenAt"].as_str().unwrap().ends_with(".000Z"),
        "{taken}"
    );
    assert_eq!(taken["removed"], serde_json::json!([]));
}

#[test]
fn keep_leaves_the_newest_backups_and_nothing_else_is_touched() {
    sqlite_only!(
        "loops backup copies the SQLite file (VACUUM INTO); PostgreSQL is backed up with pg_dump"
    );
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1h"]);
    let first = backup(&env, &[]);
    let second = backup(&env, &[]);
    let third = backup(&env, &[]);
    assert_eq!(listed(&env), [third.clone(), second.clone(), first.clone()]);
    std::fs::write(backups_dir(&env).join("notes.txt"), "mine").unwrap();

    let taken = env.loops(["--json", "backup", "--keep", "2"]).run().json();
    let fourth = PathBuf::from(taken["path"].as_str().unwrap());
    let removed: Vec<&str> = taken["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["path"].as_str().unwrap())
        .collect();
    assert_eq!(removed, [second.to_str().unwrap(), first.to_str().unwrap()]);
    assert_eq!(listed(&env), [fourth, third]);
    assert!(backups_dir(&env).join("notes.txt").exists());

    env.loops(["backup", "--keep", "0"])
        .code(1)
        .stderr_has("--keep must be a positive integer")
        .run();
    env.loops(["backup", "--list", "--keep", "2"]).code(2).run();
}

#[test]
fn list_prints_the_backups_newest_first() {
    sqlite_only!(
        "loops backup copies the SQLite file (VACUUM INTO); PostgreSQL is backed up with pg_dump"
    );
    let env = TestEnv::new();
    env.loops(["backup", "--list"])
        .stdout("")
        .stderr_has("no backups in")
        .run();
    env.loops(["list"]).run();
    let older = backup(&env, &[]);
    let newer = backup(&env, &[]);

    // Piped: a header and the rows, no rule (issue 28); the time is local.
    let ran = env.loops(["backup", "--list"]).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", ran.stdout);
    assert!(lines[0].starts_with("TAKEN"), "{}", ran.stdout);
    for (line, path) in lines[1..].iter().zip([&newer, &older]) {
        let fields: Vec<&str> = line.split("  ").filter(|f| !f.is_empty()).collect();
        assert_eq!(fields.len(), 3, "{line}");
        assert_eq!(fields[0].len(), "2026-01-05 13:00:07".len(), "{line}");
        assert!(!fields[0].ends_with('Z'), "{line}");
        assert!(fields[1].trim().ends_with("KiB"), "{line}");
        assert_eq!(fields[2], path.to_str().unwrap());
    }

    let list = env.loops(["--json", "backup", "--list"]).run().json();
    let first = &list[0];
    assert_eq!(first["path"], newer.to_str().unwrap());
    assert_eq!(
        first["sizeBytes"].as_u64(),
        Some(std::fs::metadata(&newer).unwrap().len())
    );
    assert!(first["takenAt"].as_str().unwrap() >= list[1]["takenAt"].as_str().unwrap());
}

#[test]
fn backups_are_private_whatever_the_umask() {
    sqlite_only!(
        "loops backup copies the SQLite file (VACUUM INTO); PostgreSQL is backed up with pg_dump"
    );
    let env = TestEnv::new();
    env.loops(["list"]).run();
    let base = env.cmd();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "umask 000; exec \"$0\" backup"])
        .arg(loops_tests::loops_bin())
        .stdin(Stdio::null());
    for (key, value) in base.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let ran = Ran::from(cmd.output().unwrap());
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(mode(&backups_dir(&env)), 0o700);
    let listed = listed(&env);
    assert_eq!(listed.len(), 1);
    assert_eq!(mode(&listed[0]), 0o600);
}

#[test]
fn a_backups_path_that_is_a_link_is_refused() {
    sqlite_only!(
        "loops backup copies the SQLite file (VACUUM INTO); PostgreSQL is backed up with pg_dump"
    );
    let env = TestEnv::new();
    env.loops(["list"]).run();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), backups_dir(&env)).unwrap();
    env.loops(["backup"])
        .code(1)
        .stderr_has("refusing backups directory")
        .stderr_has("symbolic link")
        .run();
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[test]
fn a_backup_alongside_a_busy_daemon_is_never_locked_out() {
    sqlite_only!(
        "loops backup copies the SQLite file (VACUUM INTO); PostgreSQL is backed up with pg_dump"
    );
    let env = TestEnv::new();
    for i in 0..6 {
        env.create_command(&format!("busy-{i}"), "true", &["--every", "1s"]);
    }
    let _daemon = Daemon::start(&env, &[]);
    wait_for("the daemon's first runs", DEADLINE, || {
        (ids(&env, &["runs", "--limit", "1000"]).len() >= 12).then_some(())
    });
    for _ in 0..5 {
        let ran = env.loops(["--json", "backup", "--keep", "10"]).run();
        assert!(!ran.stderr.contains("locked"), "{}", ran.stderr);
        let file = PathBuf::from(ran.json()["path"].as_str().unwrap());
        let copy = restored(&file);
        assert_eq!(ids(&copy, &["list"]).len(), 6);
        assert!(!ids(&copy, &["runs", "--limit", "1000"]).is_empty());
        copy.loops(["doctor"])
            .stdout_has("database passes SQLite's quick check")
            .run();
    }
}

/// Whether the database at `db` has the migration history loops adds.
fn is_migrated(db: &Path) -> bool {
    rusqlite::Connection::open(db)
        .and_then(|c| {
            c.query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'refinery_schema_history'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .expect("the schema reads")
        > 0
}

#[test]
fn an_original_database_is_backed_up_once_before_its_migration() {
    sqlite_only!("an original 0.3.1 database file, backed up before its migration");
    let env = TestEnv::new();
    env.original_db(ORIGINAL_LOOP);
    env.loops(["list"])
        .stdout_has("legacy")
        .stderr_has("backed up the database to ")
        .stderr_has("before migrating its schema")
        .run();
    let backups = listed(&env);
    assert_eq!(backups.len(), 1);
    // The copy is the file as the original left it, with its loop.
    assert!(!is_migrated(&backups[0]));
    assert!(is_migrated(&env.db_path()));
    let name: String = rusqlite::Connection::open(&backups[0])
        .unwrap()
        .query_row("SELECT name FROM loops", [], |r| r.get(0))
        .unwrap();
    assert_eq!(name, "legacy");

    // Nothing left to migrate: no backup, no note.
    let ran = env.loops(["list"]).run();
    assert!(!ran.stderr.contains("backed up"), "{}", ran.stderr);
    assert_eq!(listed(&env), backups);
}

#[test]
fn a_failed_backup_stops_the_migration_unless_skipped() {
    sqlite_only!("an original 0.3.1 database file, backed up before its migration");
    let env = TestEnv::new();
    env.original_db(ORIGINAL_LOOP);
    std::fs::write(backups_dir(&env), "in the way").unwrap();
    env.loops(["list"])
        .code(1)
        .stderr_has("could not back up the database")
        .stderr_has("before migrating its schema")
        .stderr_has("LOOPS_SKIP_BACKUP=1")
        .run();
    assert!(!is_migrated(&env.db_path()));

    env.loops(["list"])
        .env("LOOPS_SKIP_BACKUP", Some("1"))
        .stdout_has("legacy")
        .run();
    assert!(is_migrated(&env.db_path()));
}

#[test]
fn a_new_database_is_not_backed_up() {
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1h"]);
    env.loops(["list"]).run();
    assert!(!backups_dir(&env).exists());
}

/// A data directory of forty loops, and the root page of their table.
fn forty_loops() -> (TestEnv, u64) {
    let env = TestEnv::new();
    for i in 0..40 {
        env.create_command(&format!("job-{i}"), "true", &["--every", "1h"]);
    }
    let root: i64 = rusqlite::Connection::open(env.db_path())
        .and_then(|c| {
            c.query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'loops'",
                [],
                |r| r.get(0),
            )
        })
        .expect("the loops table's root page");
    (env, u64::try_from(root).expect("a page number"))
}

#[test]
fn doctor_says_when_a_damaged_database_has_no_backup() {
    sqlite_only!("damages a page of the SQLite file");
    let (env, root) = forty_loops();
    crate::doctor::scribble_over_page(&env.db_path(), root);
    let ran = env.loops(["doctor"]).code(1).run();
    assert!(
        ran.stdout.contains(&format!(
            "there is no backup in {} to restore",
            backups_dir(&env).display()
        )),
        "{}",
        ran.stdout
    );
}

#[test]
fn doctor_names_the_newest_backup_of_a_damaged_database() {
    sqlite_only!("damages a page of the SQLite file");
    let (env, root) = forty_loops();
    backup(&env, &[]);
    let newest = backup(&env, &[]);
    crate::doctor::scribble_over_page(&env.db_path(), root);
    let report = env.loops(["--json", "doctor"]).code(1).run().json();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "database-integrity")
        .cloned()
        .unwrap();
    assert_eq!(check["status"], "fail", "{check}");
    let message = check["message"].as_str().unwrap();
    let db = env.db_path().display().to_string();
    for part in [
        "stop the daemon (loops daemon stop)".to_owned(),
        "restore the newest backup, taken ".to_owned(),
        format!("rm -f {db}-wal {db}-shm && cp {} {db}", newest.display()),
        ".recover".to_owned(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message}");
    }

    // Any command that reads the damage gives the same advice.
    let list = env.loops(["list"]).code(1).run();
    let restore = format!("cp {} {db}", newest.display());
    assert!(
        list.stderr.contains("is damaged)") && list.stderr.contains(&restore),
        "{}",
        list.stderr
    );

    // Following the advice gives back a healthy database.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{suffix}"));
    }
    std::fs::copy(&newest, env.db_path()).unwrap();
    assert_eq!(ids(&env, &["list"]).len(), 40);
    env.loops(["doctor"]).run();
}
