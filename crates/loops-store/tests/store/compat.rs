//! Opening databases written by the original (0.3.1 and 0.2.0), refusing
//! files that are not ours, file modes, and the stored shapes of instants
//! and ids (SPEC §4.1, §4.2, §0; §10 items 32 and 35).

use std::os::unix::fs::PermissionsExt;

use loops_core::{ExecutorStatus, LoopStatus, RunStatus};
use loops_store::testing::RawDb;
use loops_store::{Claim, LoopFilter, OpenError, RunFilter, Store};
use rusqlite::Connection;

use crate::common::*;

/// The tables and indexes exactly as the original 0.3.1 creates them.
const ORIGINAL_0_3_1_SCHEMA: &str =
    include_str!("../../../../tests/fixtures/original-0.3.1-schema.sql");

/// Rows as the original writes them: one due interval loop, one paused
/// cron loop, a succeeded run, a failed run with a retry pending, and a
/// workflow with a finished run.
const ORIGINAL_ROWS: &str = r#"
PRAGMA journal_mode = WAL;
INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'heartbeat', NULL, 'active',
  '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
  '{"type":"command","command":"echo hi","shell":true}',
  '2025-12-01T10:05:00.000Z', '2025-12-01T10:03:00.000Z', 'latest', 50, 'skip', 3, 60000, 1800000,
  NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:04:01.000Z');
INSERT INTO loops VALUES ('0a0b0c0d0e0f', 'nightly', 'cron job', 'paused',
  '{"type":"cron","expression":"0 3 * * *"}',
  '{"type":"agent","provider":"claude","prompt":"tidy up","timeoutMs":600000}',
  '2025-12-02T03:00:00.000Z', NULL, 'none', 50, 'allow', 1, 60000, 1800000,
  '2026-12-31T00:00:00.000Z', '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');
INSERT INTO loop_runs VALUES ('111111111111', 'a1b2c3d4e5f6', 'heartbeat', '2025-12-01T10:01:00.000Z',
  1, 'succeeded', '2025-12-01T10:01:00.010Z', '2025-12-01T10:01:00.120Z', 'myhost:4242:abcdefabcdef',
  NULL, 5151, 0, 110, 'hi
', '', NULL, '2025-12-01T10:01:00.010Z', '2025-12-01T10:01:00.120Z');
INSERT INTO loop_runs VALUES ('222222222222', 'a1b2c3d4e5f6', 'heartbeat', '2025-12-01T10:03:00.000Z',
  1, 'failed', '2025-12-01T10:03:00.010Z', '2025-12-01T10:03:01.000Z', 'manual-tick:77',
  NULL, 5152, 3, 990, '', 'boom', 'process exited with code 3', '2025-12-01T10:03:00.010Z',
  '2025-12-01T10:03:01.000Z');
INSERT INTO workflow_specs VALUES ('f0f0f0f0f0f0', 'deploy', NULL, 1, 'active',
  '[{"id":"build","target":{"type":"command","command":"make"},"dependsOn":[],"continueOnFailure":false}]',
  '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');
INSERT INTO workflow_runs VALUES ('e0e0e0e0e0e0', 'f0f0f0f0f0f0', 'deploy', NULL, NULL, NULL, NULL,
  'succeeded', '2025-12-01T10:00:01.000Z', '2025-12-01T10:00:02.000Z', 1000, NULL,
  '2025-12-01T10:00:01.000Z', '2025-12-01T10:00:02.000Z');
INSERT INTO workflow_step_runs VALUES ('d0d0d0d0d0d0', 'e0e0e0e0e0e0', 'build', 0, 'succeeded',
  '2025-12-01T10:00:01.000Z', '2025-12-01T10:00:02.000Z', 0, NULL, 1000, 'ok', '', NULL, NULL, NULL,
  '2025-12-01T10:00:01.000Z', '2025-12-01T10:00:02.000Z');
INSERT INTO workflow_events VALUES ('c0c0c0c0c0c0', 'e0e0e0e0e0e0', 1, 'created', NULL,
  '{"workflowId":"f0f0f0f0f0f0","workflowName":"deploy","stepCount":1}', '2025-12-01T10:00:01.000Z');
INSERT INTO daemon_lease VALUES ('abcdefabcdef', 4242, 'myhost', '2025-12-01T10:04:00.000Z',
  '2025-12-01T10:05:00.000Z', '2025-12-01T09:00:00.000Z', '2025-12-01T10:04:00.000Z');
"#;

const TABLES: [&str; 7] = [
    "schema_migrations",
    "loops",
    "loop_runs",
    "daemon_lease",
    "workflow_specs",
    "workflow_runs",
    "workflow_step_runs",
];

fn counts(c: &RawDb) -> Vec<i64> {
    TABLES
        .iter()
        .chain(["workflow_events"].iter())
        .map(|t| c.int(&format!("SELECT COUNT(*) FROM {t}")).unwrap())
        .collect()
}

fn has_column(c: &RawDb, table: &str, column: &str) -> bool {
    c.int(&format!(
        "SELECT COUNT(*) FROM pragma_table_info({}) WHERE name = {}",
        lit(table),
        lit(column)
    ))
    .unwrap()
        > 0
}

/// The fixture's data directory, 0700 whatever the umask.
fn make_data_dir(fx: &Fixture) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(fx.path().parent().unwrap())
        .unwrap();
}

/// A new database file made 0600 whatever the umask, as the original's
/// would be under the usual one (loops refuses a group-writable database).
fn open_private(path: &std::path::Path) -> Connection {
    let c = Connection::open(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    c
}

fn write_original(fx: &Fixture, schema: &str) {
    make_data_dir(fx);
    let c = open_private(&fx.path());
    c.execute_batch(schema).unwrap();
    c.execute_batch(ORIGINAL_ROWS).unwrap();
}

#[test]
fn an_original_0_3_1_database_opens_without_losing_a_row() {
    sqlite_only!("opens a database file the original 0.3.1 wrote");
    let fx = Fixture::new();
    write_original(&fx, ORIGINAL_0_3_1_SCHEMA);
    let before = counts(&fx.raw());
    let store = fx.store();
    let raw = fx.raw();
    assert_eq!(counts(&raw), before);
    assert!(has_column(&raw, "loop_runs", "pid_start_ms"));
    let applied = raw
        .text("SELECT applied_at FROM schema_migrations WHERE id = '0001_initial_and_workflows'")
        .unwrap();
    assert_eq!(
        applied, "2025-12-01T10:00:00.000Z",
        "the original's row is untouched"
    );

    // Every row decodes.
    assert_eq!(store.list_loops(&LoopFilter::default()).unwrap().len(), 2);
    let runs = store.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, RunStatus::Failed);
    assert_eq!(runs[1].stdout.as_deref(), Some("hi\n"));
    let lease = store.get_daemon_lease().unwrap().unwrap();
    assert_eq!(lease.hostname, "myhost");
    let nightly = store.require_loop("nightly").unwrap();
    assert_eq!(nightly.status, LoopStatus::Paused);

    // The due loop is due and its pending retry is claimable as attempt 2.
    let now = loops_core::Timestamp::parse("2025-12-01T10:05:00.000Z").unwrap();
    let due = store.due_loops(now, 10).unwrap();
    assert_eq!(due.len(), 1);
    let lp = &due[0];
    assert_eq!(lp.retry_scheduled_for, Some(runs[0].scheduled_for));
    let Claim::Claimed { run, .. } = store
        .claim_run(lp, lp.retry_scheduled_for.unwrap(), RUNNER_A, now)
        .unwrap()
    else {
        panic!("the original's failed run is not claimable");
    };
    assert_eq!((run.id.as_str(), run.attempt), ("222222222222", 2));
    // Its overlap is `skip`: the due slot waits for the retry to finish.
    store
        .finalize_run(&run.id, &result(ExecutorStatus::Succeeded, now), None, now)
        .unwrap();
    let Claim::Claimed { run, .. } = store
        .claim_run(lp, lp.next_run_at.unwrap(), RUNNER_A, now)
        .unwrap()
    else {
        panic!("the original's due slot is not claimable");
    };
    assert_eq!(run.attempt, 1);
}

// SPEC §10 item 32
#[test]
fn a_0_2_0_database_gains_the_step_pid_column_and_reopening_is_idempotent() {
    sqlite_only!("migrates a database file the original 0.2.0 wrote");
    let fx = Fixture::new();
    let old = ORIGINAL_0_3_1_SCHEMA.replace(
        "finished_at TEXT, exit_code INTEGER, pid INTEGER, duration_ms INTEGER, stdout TEXT,",
        "finished_at TEXT, exit_code INTEGER, duration_ms INTEGER, stdout TEXT,",
    );
    assert_ne!(old, ORIGINAL_0_3_1_SCHEMA);
    make_data_dir(&fx);
    let c = open_private(&fx.path());
    c.execute_batch(&old).unwrap();
    drop(c);
    assert!(!has_column(&fx.raw(), "workflow_step_runs", "pid"));

    drop(fx.store());
    let raw = fx.raw();
    assert!(has_column(&raw, "workflow_step_runs", "pid"));
    assert!(has_column(&raw, "workflow_step_runs", "pid_start_ms"));
    let schema = |c: &RawDb| -> Vec<String> {
        c.texts("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
    };
    let first = (schema(&raw), counts(&raw));
    drop(fx.store());
    drop(fx.store());
    assert_eq!((schema(&raw), counts(&raw)), first);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_untouched() {
    sqlite_only!("about a file that is not a SQLite database");
    let fx = Fixture::new();
    make_data_dir(&fx);
    let bytes = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(fx.path(), &bytes).unwrap();
    std::fs::set_permissions(fx.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = Store::open(&fx.path(), std::sync::Arc::new(|_| false)).unwrap_err();
    assert!(
        matches!(err, OpenError::NotADatabase { ref path, .. } if *path == fx.path()),
        "{err}"
    );
    assert!(err.to_string().contains(&fx.path().display().to_string()));
    assert_eq!(std::fs::read(fx.path()).unwrap(), bytes);
}

#[test]
fn a_database_from_a_newer_loops_is_refused_and_left_untouched() {
    sqlite_only!("checks the SQLite file's bytes stay as they were");
    let fx = Fixture::new();
    drop(fx.store());
    fx.raw().batch(
        "PRAGMA wal_checkpoint(TRUNCATE);
             INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             VALUES (999, 'future', '2030-01-01T00:00:00Z', '0');
             PRAGMA wal_checkpoint(TRUNCATE);",
    );
    let bytes = std::fs::read(fx.path()).unwrap();
    let err = Store::open(&fx.path(), std::sync::Arc::new(|_| false)).unwrap_err();
    assert!(
        matches!(err, OpenError::NewerSchema { found: 999, .. }),
        "{err}"
    );
    assert_eq!(std::fs::read(fx.path()).unwrap(), bytes);
}

#[test]
fn the_data_dir_is_private_and_the_database_file_too() {
    sqlite_only!("about the SQLite file's mode");
    let fx = Fixture::new();
    let data = fx.dir.path().join("nested").join("data");
    let store = Store::open_in_dir(&data, std::sync::Arc::new(|_| false)).unwrap();
    assert_eq!(store.path(), Some(data.join("loops.db").as_path()));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("loops.db")), 0o600);
}

fn is_instant(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

// SPEC §10 item 35
#[test]
fn every_stored_instant_and_id_has_the_spec_shape() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "shapes", 2);
    let Claim::Claimed { run, .. } = store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap() else {
        panic!("not claimed");
    };
    insert_linked_workflow(&fx, lp.id.as_str(), run.id.as_str(), Some(5));
    store
        .recover_expired_run_leases(run.lease_expires_at.unwrap())
        .unwrap();
    store
        .create_skipped_run(&lp, t0().add_ms(1), "previous run still active", t0())
        .unwrap();
    let lease = loops_store::LeaseRequest {
        id: loops_core::LeaseId::parse("abcdefabcdef").unwrap(),
        pid: 1,
        hostname: "h".into(),
        ttl_ms: 1000,
    };
    store.acquire_daemon_lease(&lease, t0()).unwrap();

    let raw = fx.raw();
    let mut checked = 0;
    for table in [
        "loops",
        "loop_runs",
        "daemon_lease",
        "workflow_runs",
        "workflow_step_runs",
        "workflow_events",
    ] {
        // On PostgreSQL an instant column is a timestamptz, which reads
        // back in the SPEC's shape; one left as text would be checked as
        // it is.
        let cols = raw.texts(&if fx.on_postgres() {
            format!(
                "SELECT column_name::text FROM information_schema.columns
                 WHERE table_schema = 'public' AND table_name = {}",
                lit(table)
            )
        } else {
            format!("SELECT name FROM pragma_table_info({})", lit(table))
        });
        for col in cols {
            let instant =
                col.ends_with("_at") || col == "scheduled_for" || col == "retry_scheduled_for";
            let id = col == "id" || (col.ends_with("_id") && col != "step_id");
            if !instant && !id {
                continue;
            }
            let values = raw.texts(&format!(
                "SELECT {col} FROM {table} WHERE {col} IS NOT NULL"
            ));
            for v in values {
                checked += 1;
                if instant {
                    assert!(is_instant(&v), "{table}.{col} = {v:?}");
                } else {
                    assert!(loops_core::is_id(&v), "{table}.{col} = {v:?}");
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} values checked");
}
