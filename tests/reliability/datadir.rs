//! A subverted data directory (issue 12 §3): another user could write the
//! data directory or the database, or planted a symbolic link where loops
//! keeps `loops.db`, `loops.db-wal` or `loops.db-shm`.
//!
//! What must hold for every command that opens the database: it exits 1
//! with a first stderr line `error: ... refusing ...` that names the path
//! and the fix, and it changes nothing: not the directory's or the
//! database's mode, not the database's bytes, and not the file a link
//! points to (its mode and contents stay, and a dangling link's target is
//! not created). A command never hangs on it. Ownership by another uid is
//! set up with chown, which needs root; without it those cases are skipped
//! with a printed note.

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use loops_tests::{Ran, TestEnv, sqlite_only};

use crate::support::{long, report_failures, wait_for};

const TEST: &str = "datadir";

/// The commands run against each subverted directory (LONG: more).
fn commands() -> Vec<Vec<&'static str>> {
    let mut all = vec![
        vec!["list"],
        vec!["create", "command", "new", "--cmd", "true", "--every", "1h"],
        vec!["show", "kept"],
        vec!["runs"],
        vec!["tick"],
        vec!["daemon", "run"],
    ];
    if long() {
        all.extend([
            vec!["--json", "list"],
            vec!["pause", "kept"],
            vec!["resume", "kept"],
            vec!["stop", "kept"],
            vec!["remove", "kept"],
            vec!["run-now", "kept"],
            vec!["workflows", "list"],
            vec!["workflows", "runs"],
            vec![
                "create",
                "agent",
                "a",
                "--provider",
                "codex",
                "--prompt",
                "p",
                "--every",
                "1h",
            ],
        ]);
    }
    all
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0)
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs `loops <args>`, killing it if it has not exited within 30 s.
fn run_bounded(env: &TestEnv, args: &[&str]) -> (Ran, bool) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("out");
    let err = dir.path().join("err");
    let mut child = env
        .cmd()
        .args(args)
        .stdout(std::fs::File::create(&out).expect("a stdout file"))
        .stderr(std::fs::File::create(&err).expect("a stderr file"))
        .stdin(Stdio::null())
        .spawn()
        .expect("loops starts");
    let status = wait_for(Duration::from_secs(30), || {
        child.try_wait().expect("waiting on loops")
    });
    let hung = status.is_none();
    if hung {
        let _ = child.kill();
        let _ = child.wait();
    }
    let ran = Ran {
        code: status.and_then(|s| s.code()).unwrap_or(-1),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    };
    (ran, hung)
}

/// One way the data directory was subverted.
struct Case {
    name: &'static str,
    /// Plants the fault in `env` (whose database holds the loop `kept`);
    /// returns the files that must not change (a link's target).
    plant: fn(&TestEnv) -> Vec<PathBuf>,
    /// Text the refusal must contain.
    says: &'static str,
    /// Needs root (chown).
    root: bool,
}

/// A file of this user's that a planted link points to.
fn victim(env: &TestEnv) -> PathBuf {
    let path = env.home().join("victim");
    std::fs::write(&path, "not loops' file").expect("a victim file");
    chmod(&path, 0o644);
    path
}

/// Replaces `path` with a link to a victim file.
fn plant_link(env: &TestEnv, path: &Path) -> Vec<PathBuf> {
    let target = victim(env);
    let _ = std::fs::remove_file(path);
    symlink(&target, path).expect("a planted link");
    vec![target]
}

fn companion(env: &TestEnv, suffix: &str) -> PathBuf {
    let mut p = env.db_path().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "data dir 0777",
            plant: |env| {
                chmod(&env.data_dir(), 0o777);
                Vec::new()
            },
            says: "writable by group or others (mode 0777)",
            root: false,
        },
        Case {
            name: "data dir 0775",
            plant: |env| {
                chmod(&env.data_dir(), 0o775);
                Vec::new()
            },
            says: "run chmod 700",
            root: false,
        },
        Case {
            name: "database 0666",
            plant: |env| {
                chmod(&env.db_path(), 0o666);
                Vec::new()
            },
            says: "run chmod 600",
            root: false,
        },
        Case {
            name: "loops.db is a link",
            plant: |env| plant_link(env, &env.db_path()),
            says: "is a symbolic link",
            root: false,
        },
        Case {
            name: "loops.db is a dangling link",
            plant: |env| {
                let nowhere = env.home().join("nowhere");
                let _ = std::fs::remove_file(env.db_path());
                symlink(&nowhere, env.db_path()).expect("a planted link");
                vec![nowhere]
            },
            says: "is a symbolic link",
            root: false,
        },
        Case {
            name: "loops.db-wal is a link",
            plant: |env| plant_link(env, &companion(env, "-wal")),
            says: "is a symbolic link",
            root: false,
        },
        Case {
            name: "loops.db-shm is a link",
            plant: |env| plant_link(env, &companion(env, "-shm")),
            says: "is a symbolic link",
            root: false,
        },
        Case {
            name: "data dir of another user",
            plant: |env| {
                std::os::unix::fs::chown(env.data_dir(), Some(4242), None).expect("chown");
                Vec::new()
            },
            says: "owned by uid 4242",
            root: true,
        },
        Case {
            name: "database of another user",
            plant: |env| {
                std::os::unix::fs::chown(env.db_path(), Some(4242), None).expect("chown");
                Vec::new()
            },
            says: "owned by uid 4242",
            root: true,
        },
        Case {
            name: "data dir is another user's link",
            plant: |env| {
                // The real directory moves; the data dir becomes a link to
                // it that uid 4242 made.
                let real = env.home().join("real-data");
                std::fs::rename(env.data_dir(), &real).expect("a move");
                symlink(&real, env.data_dir()).expect("a link");
                std::os::unix::fs::lchown(env.data_dir(), Some(4242), None).expect("lchown");
                Vec::new()
            },
            says: "symbolic link owned by uid 4242",
            root: true,
        },
    ]
}

/// What must not change: modes of the data dir and the database, the
/// database's bytes, and each protected file's mode and contents (or
/// absence).
#[derive(Debug, PartialEq)]
struct Snapshot {
    dir_mode: u32,
    db_mode: u32,
    db: Option<Vec<u8>>,
    protected: Vec<(PathBuf, u32, Option<Vec<u8>>)>,
}

fn snapshot(env: &TestEnv, protected: &[PathBuf]) -> Snapshot {
    let read = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|_| std::fs::read(p).ok())
    };
    Snapshot {
        dir_mode: mode(&env.data_dir()),
        db_mode: mode(&env.db_path()),
        db: read(&env.db_path()),
        protected: protected
            .iter()
            .map(|p| (p.clone(), mode(p), read(p)))
            .collect(),
    }
}

/// Every command against every subverted data directory is refused with
/// its fix, changes nothing and never hangs (SHORT: 6 commands, LONG: 15).
#[test]
fn a_subverted_data_directory_is_refused_by_every_command() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let started = Instant::now();
    let root = is_root();
    let commands = commands();
    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0;
    for case in cases() {
        if case.root && !root {
            eprintln!(
                "reliability: {TEST}: skipping {:?}: chown needs root",
                case.name
            );
            continue;
        }
        for args in &commands {
            let env = TestEnv::new();
            env.create_command("kept", "true", &["--every", "1h"]);
            let protected = (case.plant)(&env);
            let before = snapshot(&env, &protected);
            let (ran, hung) = run_bounded(&env, args);
            checked += 1;
            let first = ran.stderr.lines().next().unwrap_or_default();
            let refused = ran.code == 1
                && first.starts_with("error: ")
                && first.contains("refusing")
                && first.contains(case.says);
            if hung || !refused {
                failures.push(format!(
                    "{}: loops {args:?}: {}exit {}, stderr:\n{}",
                    case.name,
                    if hung { "hung; " } else { "" },
                    ran.code,
                    ran.stderr.trim_end()
                ));
            }
            let after = snapshot(&env, &protected);
            if after != before {
                failures.push(format!(
                    "{}: loops {args:?} changed files:\nbefore {before:?}\nafter  {after:?}",
                    case.name
                ));
            }
        }
    }
    report_failures(
        TEST,
        &format!("{checked} commands on subverted data directories"),
        started,
        &failures,
    );
}
