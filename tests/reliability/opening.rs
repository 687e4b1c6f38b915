//! Opening at once: several `loops` processes started together on a data
//! directory with no database yet, or on a copy of a database the original
//! 0.3.1 wrote, all open, create or migrate it at the same moment
//! (issue 12 §1).
//!
//! What must hold (SPEC §4.1, §10 item 32): every process succeeds (no
//! `database is locked`, no migration applied twice, no daemon dying at
//! start), nothing is lost (every create is listed, the original's rows are
//! kept), and the migration history records each version once.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use loops_tests::{ORIGINAL_LOOP, Ran, TestEnv, sqlite_only, write_original_db};
use rusqlite::Connection;

use crate::crash::{Foreground, daemon_log};
use crate::support::{pick, report_failures, wait_for};

/// The newest migration: the number of `V<n>__*.sql` files the store
/// embeds, so a new migration needs no change here.
fn newest_migration() -> i64 {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/loops-store/migrations/sqlite");
    let count = std::fs::read_dir(&dir)
        .expect("the store's migrations")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('V'))
        .count();
    i64::try_from(count).expect("a migration count")
}

/// Starts `loops create command <name>` (an hourly loop) in `env`.
fn spawn_create(env: &TestEnv, name: &str) -> Child {
    env.spawn(&["create", "command", name, "--cmd", "true", "--every", "1h"])
}

/// Waits for a spawned create; an error line when it failed.
fn finish_create(name: &str, child: Child) -> Option<String> {
    let out = child.wait_with_output().expect("waiting for loops create");
    let ran = Ran::from(out);
    (ran.code != 0).then(|| {
        format!(
            "create {name}: exit {}\nstderr: {}",
            ran.code,
            ran.stderr.trim_end()
        )
    })
}

/// The loop names `loops list` shows, sorted.
fn listed(env: &TestEnv) -> Vec<String> {
    let json = env.loops(["--json", "list"]).run().json();
    let mut names: Vec<String> = json
        .as_array()
        .expect("list --json prints an array")
        .iter()
        .filter_map(|lp| lp["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// The versions the migration history records, in order.
fn history(db: &Path) -> Vec<i64> {
    let c = Connection::open(db).expect("the database opens");
    let mut stmt = c
        .prepare("SELECT version FROM refinery_schema_history ORDER BY version")
        .expect("a migration history");
    stmt.query_map([], |r| r.get(0))
        .expect("the history reads")
        .collect::<rusqlite::Result<_>>()
        .expect("the history reads")
}

/// Four `loops create` and one `loops daemon run`, started together on a
/// data directory with no database, 20 times (LONG: 500): every create
/// succeeds and is listed, the daemon comes up and stops cleanly, and the
/// history holds each migration once.
#[test]
fn five_processes_at_once_on_a_new_data_directory() {
    sqlite_only!("many processes opening one SQLite file at once (the migration flock)");
    const TEST: &str = "opening-new";
    let tries = pick(20, 500);
    let started = Instant::now();
    let mut failures: Vec<String> = Vec::new();
    for attempt in 0..tries {
        let env = TestEnv::new();
        let stderr = env.home().join("daemon.stderr");
        let names: Vec<String> = (0..4).map(|i| format!("at-once-{i}")).collect();
        // The daemon starts between the creates, so it races both ways.
        let mut creates: Vec<(String, Child)> = Vec::new();
        for name in &names[..2] {
            creates.push((name.clone(), spawn_create(&env, name)));
        }
        let mut daemon = Foreground::spawn(&env, &stderr, &["--grace", "5s"]);
        for name in &names[2..] {
            creates.push((name.clone(), spawn_create(&env, name)));
        }
        for (name, child) in creates {
            if let Some(e) = finish_create(&name, child) {
                failures.push(format!("try {attempt}: {e}"));
            }
        }
        let pid = daemon.pid();
        let started_line = format!("started pid={pid} ");
        let up = wait_for(Duration::from_secs(30), || {
            if daemon_log(&env).contains(&started_line) {
                return Some(true);
            }
            daemon.exited().map(|_| false)
        });
        if up == Some(true) {
            match daemon.terminate(Duration::from_secs(30)) {
                Some(status) if status.success() => {}
                other => failures.push(format!(
                    "try {attempt}: the daemon's stop ended with {other:?}\nstderr: {}",
                    daemon.stderr()
                )),
            }
        } else {
            failures.push(format!(
                "try {attempt}: the daemon did not come up ({})\nstderr: {}",
                if up.is_some() {
                    "it exited"
                } else {
                    "timed out"
                },
                daemon.stderr()
            ));
        }
        let shown = listed(&env);
        if shown != names {
            failures.push(format!("try {attempt}: list shows {shown:?}"));
        }
        let versions = history(&env.db_path());
        if versions != (1..=newest_migration()).collect::<Vec<_>>() {
            failures.push(format!("try {attempt}: migration history {versions:?}"));
        }
    }
    report_failures(
        TEST,
        &format!("{tries} tries x 5 processes"),
        started,
        &failures,
    );
}

/// Four `loops create` started together on a copy of a database the
/// original wrote (which every one of them finds unmigrated), 30 times
/// (LONG: 1000; before the migration lock, about one try in eight lost a
/// create): all succeed, the original's loop and migration row are
/// kept, and the history holds each migration once.
// SPEC §10 item 32
#[test]
fn four_processes_at_once_on_an_original_database() {
    sqlite_only!("many processes opening one SQLite file at once (the migration flock)");
    const TEST: &str = "opening-original";
    let tries = pick(30, 1000);
    let started = Instant::now();
    let template = tempfile::tempdir().expect("a temp dir");
    let original = template.path().join("loops.db");
    write_original_db(&original, ORIGINAL_LOOP);
    let mut failures: Vec<String> = Vec::new();
    for attempt in 0..tries {
        let env = TestEnv::new();
        env.make_data_dir();
        std::fs::copy(&original, env.db_path()).expect("a copy of the original's database");
        // As the original leaves them, whatever the umask the test runs
        // under (0664 would be refused as writable by group).
        for (path, mode) in [(env.data_dir(), 0o700), (env.db_path(), 0o644)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let names: Vec<String> = (0..4).map(|i| format!("at-once-{i}")).collect();
        let creates: Vec<(String, Child)> = names
            .iter()
            .map(|name| (name.clone(), spawn_create(&env, name)))
            .collect();
        for (name, child) in creates {
            if let Some(e) = finish_create(&name, child) {
                failures.push(format!("try {attempt}: {e}"));
            }
        }
        let mut expected = names.clone();
        expected.push("legacy".to_owned());
        expected.sort();
        let shown = listed(&env);
        if shown != expected {
            failures.push(format!("try {attempt}: list shows {shown:?}"));
        }
        let versions = history(&env.db_path());
        if versions != (1..=newest_migration()).collect::<Vec<_>>() {
            failures.push(format!("try {attempt}: migration history {versions:?}"));
        }
        let kept: i64 = Connection::open(env.db_path())
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0)))
            .unwrap_or(-1);
        if kept != 1 {
            failures.push(format!(
                "try {attempt}: {kept} rows in the original's schema_migrations"
            ));
        }
    }
    report_failures(
        TEST,
        &format!("{tries} tries x 4 processes"),
        started,
        &failures,
    );
}
