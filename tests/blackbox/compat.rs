//! A database written by the original 0.3.1 works in place: `tick` runs its
//! due loop and `runs` shows the result (SPEC §4.1, §4.2).

use loops_tests::TestEnv;
use rusqlite::Connection;

/// The tables and indexes exactly as the original 0.3.1 creates them.
const ORIGINAL_0_3_1_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS schema_migrations (id TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS loops (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT, status TEXT NOT NULL,
  schedule_json TEXT NOT NULL, target_json TEXT NOT NULL, next_run_at TEXT,
  retry_scheduled_for TEXT, catch_up TEXT NOT NULL, catch_up_limit INTEGER NOT NULL,
  overlap TEXT NOT NULL, max_attempts INTEGER NOT NULL, retry_delay_ms INTEGER NOT NULL,
  lease_ms INTEGER NOT NULL, expires_at TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx_loops_status_next ON loops(status, next_run_at);
CREATE INDEX IF NOT EXISTS idx_loops_name ON loops(name);
CREATE TABLE IF NOT EXISTS loop_runs (
  id TEXT PRIMARY KEY, loop_id TEXT NOT NULL, loop_name TEXT NOT NULL, scheduled_for TEXT NOT NULL,
  attempt INTEGER NOT NULL, status TEXT NOT NULL, started_at TEXT, finished_at TEXT,
  claimed_by TEXT, lease_expires_at TEXT, pid INTEGER, exit_code INTEGER, duration_ms INTEGER,
  stdout TEXT, stderr TEXT, error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  UNIQUE(loop_id, scheduled_for));
CREATE INDEX IF NOT EXISTS idx_runs_loop ON loop_runs(loop_id, created_at);
CREATE INDEX IF NOT EXISTS idx_runs_status ON loop_runs(status);
CREATE INDEX IF NOT EXISTS idx_runs_scheduled ON loop_runs(scheduled_for);
CREATE TABLE IF NOT EXISTS daemon_lease (
  id TEXT PRIMARY KEY, pid INTEGER NOT NULL, hostname TEXT NOT NULL, heartbeat_at TEXT NOT NULL,
  expires_at TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workflow_specs (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT, version INTEGER NOT NULL,
  status TEXT NOT NULL, steps_json TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx_workflows_status_name ON workflow_specs(status, name);
CREATE UNIQUE INDEX IF NOT EXISTS idx_workflows_name_active ON workflow_specs(name) WHERE status = 'active';
CREATE TABLE IF NOT EXISTS workflow_runs (
  id TEXT PRIMARY KEY,
  workflow_id TEXT NOT NULL REFERENCES workflow_specs(id) ON DELETE CASCADE,
  workflow_name TEXT NOT NULL,
  loop_id TEXT REFERENCES loops(id) ON DELETE SET NULL,
  loop_run_id TEXT REFERENCES loop_runs(id) ON DELETE SET NULL,
  scheduled_for TEXT, idempotency_key TEXT, status TEXT NOT NULL, started_at TEXT,
  finished_at TEXT, duration_ms INTEGER, error TEXT, created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS idx_workflow_runs_idempotency ON workflow_runs(workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_workflow_runs_workflow_created ON workflow_runs(workflow_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_loop_run ON workflow_runs(loop_run_id);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_status ON workflow_runs(status);
CREATE TABLE IF NOT EXISTS workflow_step_runs (
  id TEXT PRIMARY KEY,
  workflow_run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
  step_id TEXT NOT NULL, sequence INTEGER NOT NULL, status TEXT NOT NULL, started_at TEXT,
  finished_at TEXT, exit_code INTEGER, pid INTEGER, duration_ms INTEGER, stdout TEXT,
  stderr TEXT, error TEXT, account_profile TEXT, account_tool TEXT, created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL, UNIQUE(workflow_run_id, step_id));
CREATE INDEX IF NOT EXISTS idx_workflow_step_runs_run_sequence ON workflow_step_runs(workflow_run_id, sequence);
CREATE INDEX IF NOT EXISTS idx_workflow_step_runs_status ON workflow_step_runs(status);
CREATE TABLE IF NOT EXISTS workflow_events (
  id TEXT PRIMARY KEY,
  workflow_run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
  sequence INTEGER NOT NULL, event_type TEXT NOT NULL, step_id TEXT, payload_json TEXT,
  created_at TEXT NOT NULL, UNIQUE(workflow_run_id, sequence));
CREATE INDEX IF NOT EXISTS idx_workflow_events_run_sequence ON workflow_events(workflow_run_id, sequence);
INSERT OR IGNORE INTO schema_migrations (id, applied_at) VALUES ('0001_initial_and_workflows', '2025-12-01T10:00:00.000Z');
";

/// One due interval loop, as the original's `create command` writes it.
const LEGACY_LOOP: &str = r#"
INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'legacy', NULL, 'active',
  '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
  '{"type":"command","command":"printf legacy","shell":true}',
  '2025-12-01T10:05:00.000Z', NULL, 'latest', 50, 'skip', 1, 60000, 1800000,
  NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');
"#;

#[test]
fn an_original_database_ticks_in_place() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.data_dir()).unwrap();
    let db = Connection::open(env.db_path()).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
    db.execute_batch(ORIGINAL_0_3_1_SCHEMA).unwrap();
    db.execute_batch(LEGACY_LOOP).unwrap();
    drop(db);

    env.loops(["tick"])
        .stdout("completed=1 skipped=0 recovered=0 expired=0\n")
        .run();

    let runs = env.loops(["--json", "runs", "--show-output"]).run().json();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    let run = &runs[0];
    assert_eq!(run["loopId"], "a1b2c3d4e5f6");
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["stdout"], "legacy");
    // `latest` catch-up ran one slot on the loop's one-minute grid.
    let slot = run["scheduledFor"].as_str().unwrap();
    assert!(
        slot.ends_with(":00.000Z") && slot >= "2025-12-01T10:05:00.000Z",
        "{slot}"
    );

    let lp = env.loops(["show", "legacy"]).run().json();
    let next = lp["nextRunAt"].as_str().unwrap();
    assert!(next > slot, "the loop advanced past its slot: {next}");
    assert!(
        next.ends_with(":00.000Z"),
        "fixed_rate keeps the grid: {next}"
    );
    assert_eq!(lp["target"]["shell"], true);
}
