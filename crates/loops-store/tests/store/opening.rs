//! Opening one database from many connections at once, as many processes
//! starting together do: a new file, and a file the original 0.3.1 wrote.
//! Every open succeeds, the migrations are applied once, and no row is
//! lost (SPEC §4.1; issue 12 §1). The threads open their own connections,
//! and the migration lock excludes them as it excludes processes.
//! `tests/reliability/opening.rs` does the same with `loops` processes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Barrier};

use loops_store::{LoopFilter, SCHEMA_VERSION, Store, StoreError};
use rusqlite::Connection;

use crate::common::*;

/// The tables and indexes exactly as the original 0.3.1 creates them.
const ORIGINAL_0_3_1_SCHEMA: &str =
    include_str!("../../../../tests/fixtures/original-0.3.1-schema.sql");

/// One loop as the original's `create command` writes it.
const ORIGINAL_LOOP: &str = r#"
INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'legacy', NULL, 'active',
  '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
  '{"type":"command","command":"printf legacy","shell":true}',
  '2025-12-01T10:05:00.000Z', NULL, 'latest', 50, 'skip', 1, 60000, 1800000,
  NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');
"#;

/// Opens `db` from `n` threads released at the same moment, each creating
/// one loop; returns what each open and create gave.
fn open_at_once(db: &Path, n: usize) -> Vec<Result<(), StoreError>> {
    let gate = Arc::new(Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let gate = Arc::clone(&gate);
            let db = db.to_owned();
            std::thread::spawn(move || {
                gate.wait();
                let store = Store::open(&db, Arc::new(|_| false))?;
                store
                    .create_loop(&interval_loop(&format!("at-once-{i}")), t0())
                    .map(drop)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("an opening thread panicked"))
        .collect()
}

/// The versions the migration history records, in order.
fn history(db: &Path) -> Vec<i64> {
    let c = Connection::open(db).unwrap();
    let mut stmt = c
        .prepare("SELECT version FROM refinery_schema_history ORDER BY version")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The versions of the SQLite migrations, read from their file names:
/// parallel branches may leave a gap in the numbers until they merge.
fn all_versions() -> Vec<i64> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite");
    let mut versions: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix('V')?.split_once("__")?.0.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    assert_eq!(versions.last(), Some(&SCHEMA_VERSION));
    versions
}

/// Opens `db` from `n` threads at once: every open succeeds and the
/// history holds each migration once.
fn opens_at_once_once_migrated(db: &Path, n: usize, attempt: usize) {
    let failed: Vec<String> = open_at_once(db, n)
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    assert!(failed.is_empty(), "attempt {attempt}: {failed:#?}");
    assert_eq!(history(db), all_versions(), "attempt {attempt}");
}

// SPEC §10 item 32: reopening is idempotent, also when the opens overlap.
#[test]
fn five_connections_creating_a_database_at_once_all_succeed() {
    sqlite_only!("many connections opening one SQLite file at once (the migration flock)");
    for attempt in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("data").join("loops.db");
        opens_at_once_once_migrated(&db, 5, attempt);
        let store = Store::open(&db, Arc::new(|_| false)).unwrap();
        assert_eq!(store.count_loops(None).unwrap(), 5, "attempt {attempt}");
    }
}

// SPEC §10 item 32: an original database is migrated once, whoever opens
// it first.
#[test]
fn four_connections_opening_an_original_database_at_once_all_succeed() {
    sqlite_only!("many connections opening one SQLite file at once (the migration flock)");
    for attempt in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let db = data.join("loops.db");
        let c = Connection::open(&db).unwrap();
        c.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
        c.execute_batch(ORIGINAL_0_3_1_SCHEMA).unwrap();
        c.execute_batch(ORIGINAL_LOOP).unwrap();
        drop(c);
        // As the original leaves them, whatever the umask the test runs
        // under (0664 would be refused as writable by group).
        for (path, mode) in [(&data, 0o700), (&db, 0o644)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }

        opens_at_once_once_migrated(&db, 4, attempt);
        let store = Store::open(&db, Arc::new(|_| false)).unwrap();
        let names: Vec<String> = store
            .list_loops(&LoopFilter::default())
            .unwrap()
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(names.len(), 5, "attempt {attempt}: {names:?}");
        assert!(names.iter().any(|n| n == "legacy"), "{names:?}");
        let kept: i64 = Connection::open(&db)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, 1, "the original's migration row");
    }
}
