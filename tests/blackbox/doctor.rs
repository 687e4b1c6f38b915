//! `loops doctor` on a damaged database, and naming the implementation.

use loops_tests::{TestEnv, sqlite_only};

/// Overwrites page `page` (1-based) of the SQLite file at `path` with
/// pseudo-random bytes, after moving everything from the WAL into it.
pub(crate) fn scribble_over_page(path: &std::path::Path, page: u64) {
    let db = rusqlite::Connection::open(path).expect("the database opens");
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("the WAL is checkpointed");
    let page_size: i64 = db
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("the page size is known");
    drop(db);
    let page_size = usize::try_from(page_size).expect("a positive page size");
    let page = usize::try_from(page).expect("a page number");
    let mut bytes = std::fs::read(path).expect("the database reads");
    let start = (page - 1) * page_size;
    let end = start + page_size;
    assert!(end <= bytes.len(), "the database has no page {page}");
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut bytes[start..end] {
        // xorshift32: noise, the same on every run.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x.to_le_bytes()[0];
    }
    std::fs::write(path, bytes).expect("the database is written");
}

#[test]
fn doctor_finds_a_damaged_page_and_says_how_to_recover() {
    sqlite_only!("damages a page of the SQLite file");
    let env = TestEnv::new();
    for i in 0..40 {
        env.create_command(&format!("job-{i}"), "true", &["--every", "1h"]);
    }
    let clean = env.loops(["--json", "doctor"]).run().json();
    let integrity = |report: &serde_json::Value| -> serde_json::Value {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "database-integrity")
            .cloned()
            .unwrap_or_else(|| panic!("no integrity check: {report}"))
    };
    assert_eq!(integrity(&clean)["status"], "ok", "{clean}");

    // Page 1 holds the header and the schema, so the file still opens; the
    // root page of `loops` is noise now.
    let root: i64 = rusqlite::Connection::open(env.db_path())
        .unwrap()
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'loops'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(root > 1);
    scribble_over_page(&env.db_path(), u64::try_from(root).unwrap());

    let ran = env.loops(["doctor"]).code(1).run();
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("fail  database-integrity  ")
                && l.contains("  database is damaged; to recover, stop the daemon")),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains(".recover"), "{}", ran.stdout);
    // SPEC §9 item 31: the exit code follows the report in both modes.
    let report = env.loops(["--json", "doctor"]).code(1).run().json();
    assert_eq!(report["ok"], false);
    let check = integrity(&report);
    assert_eq!(check["status"], "fail", "{check}");
    assert!(!check["detail"].as_str().unwrap().is_empty(), "{check}");
}

#[test]
fn doctor_names_the_implementation() {
    let env = TestEnv::new();
    let expected = format!(
        "loops (Rust) {}, compatible with OpenLoops 0.3.1",
        env!("CARGO_PKG_VERSION")
    );
    let report = env.loops(["--json", "doctor"]).run().json();
    assert_eq!(report["implementation"], expected.as_str());
    assert_eq!(report["ok"], true, "the SPEC's fields stay");
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "implementation")
        .cloned()
        .unwrap();
    assert_eq!(check["status"], "ok");
    assert_eq!(check["message"], expected.as_str());
    let ran = env.loops(["doctor"]).run();
    assert!(ran.stdout.contains(&expected), "{}", ran.stdout);
}

#[test]
fn doctor_fails_a_data_dir_others_can_write() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    env.loops(["list"]).run();
    let data = env.data_dir();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let report = env.loops(["--json", "doctor"]).code(1).run().json();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "data-dir")
        .cloned()
        .unwrap();
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("writable by group or others"),
        "{check}"
    );
}

#[test]
fn cursor_passes_the_provider_check_with_the_agent_program_a_run_starts() {
    let env = TestEnv::new();
    let check = |env: &TestEnv| {
        let report = env.loops(["--json", "doctor"]).run().json();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "provider:cursor-agent")
            .cloned()
            .unwrap()
    };
    let missing = check(&env);
    assert_eq!(missing["status"], "warn");
    assert_eq!(missing["message"], "agent or cursor-agent is not on PATH");
    // A run of a cursor loop starts `agent`; the check keeps its id.
    env.write_script("agent", "exit 0");
    let found = check(&env);
    assert_eq!(found["status"], "ok");
    assert_eq!(found["message"], "agent is available");
}
