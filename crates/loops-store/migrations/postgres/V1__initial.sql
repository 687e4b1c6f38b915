-- The schema of the original loops 0.3.1 (SPEC §4.2) on PostgreSQL: the same
-- table, column and index names as migrations/sqlite/V1__initial.sql, with
-- PostgreSQL's types (timestamptz for instants, bigint for integers, json
-- for JSON columns). Versions are shared with the SQLite migrations.
--
-- json, not jsonb: jsonb stores objects with their keys reordered (by
-- length, then bytes), so a workflow event's payload, a step's unknown keys
-- or a target's env would come back in another order than SQLite returns
-- them, and `--json` output would differ between the backends. json keeps
-- the text as written and still checks that it is JSON; loops never queries
-- inside these columns, so jsonb's operators and indexes would buy nothing.
CREATE TABLE IF NOT EXISTS schema_migrations (
  id TEXT PRIMARY KEY,
  applied_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS loops (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  description TEXT,
  status TEXT NOT NULL,
  schedule_json json NOT NULL,
  target_json json NOT NULL,
  next_run_at timestamptz,
  retry_scheduled_for timestamptz,
  catch_up TEXT NOT NULL,
  catch_up_limit bigint NOT NULL,
  overlap TEXT NOT NULL,
  max_attempts bigint NOT NULL,
  retry_delay_ms bigint NOT NULL,
  lease_ms bigint NOT NULL,
  expires_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_loops_status_next ON loops(status, next_run_at);
CREATE INDEX IF NOT EXISTS idx_loops_name ON loops(name);

CREATE TABLE IF NOT EXISTS loop_runs (
  id TEXT PRIMARY KEY,
  loop_id TEXT NOT NULL,
  loop_name TEXT NOT NULL,
  scheduled_for timestamptz NOT NULL,
  attempt bigint NOT NULL,
  status TEXT NOT NULL,
  started_at timestamptz,
  finished_at timestamptz,
  claimed_by TEXT,
  lease_expires_at timestamptz,
  pid bigint,
  exit_code bigint,
  duration_ms bigint,
  stdout TEXT,
  stderr TEXT,
  error TEXT,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE(loop_id, scheduled_for)
);
CREATE INDEX IF NOT EXISTS idx_runs_loop ON loop_runs(loop_id, created_at);
CREATE INDEX IF NOT EXISTS idx_runs_status ON loop_runs(status);
CREATE INDEX IF NOT EXISTS idx_runs_scheduled ON loop_runs(scheduled_for);

CREATE TABLE IF NOT EXISTS daemon_lease (
  id TEXT PRIMARY KEY,
  pid bigint NOT NULL,
  hostname TEXT NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS workflow_specs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  description TEXT,
  version bigint NOT NULL,
  status TEXT NOT NULL,
  steps_json json NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_workflows_status_name ON workflow_specs(status, name);
CREATE UNIQUE INDEX IF NOT EXISTS idx_workflows_name_active ON workflow_specs(name) WHERE status = 'active';

CREATE TABLE IF NOT EXISTS workflow_runs (
  id TEXT PRIMARY KEY,
  workflow_id TEXT NOT NULL REFERENCES workflow_specs(id) ON DELETE CASCADE,
  workflow_name TEXT NOT NULL,
  loop_id TEXT REFERENCES loops(id) ON DELETE SET NULL,
  loop_run_id TEXT REFERENCES loop_runs(id) ON DELETE SET NULL,
  scheduled_for timestamptz,
  idempotency_key TEXT,
  status TEXT NOT NULL,
  started_at timestamptz,
  finished_at timestamptz,
  duration_ms bigint,
  error TEXT,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_workflow_runs_idempotency ON workflow_runs(workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_workflow_runs_workflow_created ON workflow_runs(workflow_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_loop_run ON workflow_runs(loop_run_id);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_status ON workflow_runs(status);

CREATE TABLE IF NOT EXISTS workflow_step_runs (
  id TEXT PRIMARY KEY,
  workflow_run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
  step_id TEXT NOT NULL,
  sequence bigint NOT NULL,
  status TEXT NOT NULL,
  started_at timestamptz,
  finished_at timestamptz,
  exit_code bigint,
  pid bigint,
  duration_ms bigint,
  stdout TEXT,
  stderr TEXT,
  error TEXT,
  account_profile TEXT,
  account_tool TEXT,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE(workflow_run_id, step_id)
);
CREATE INDEX IF NOT EXISTS idx_workflow_step_runs_run_sequence ON workflow_step_runs(workflow_run_id, sequence);
CREATE INDEX IF NOT EXISTS idx_workflow_step_runs_status ON workflow_step_runs(status);

CREATE TABLE IF NOT EXISTS workflow_events (
  id TEXT PRIMARY KEY,
  workflow_run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
  sequence bigint NOT NULL,
  event_type TEXT NOT NULL,
  step_id TEXT,
  payload_json json,
  created_at timestamptz NOT NULL,
  UNIQUE(workflow_run_id, sequence)
);
CREATE INDEX IF NOT EXISTS idx_workflow_events_run_sequence ON workflow_events(workflow_run_id, sequence);

INSERT INTO schema_migrations (id, applied_at) VALUES ('0001_initial_and_workflows', now())
  ON CONFLICT (id) DO NOTHING;
