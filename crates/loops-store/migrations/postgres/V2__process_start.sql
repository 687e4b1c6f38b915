-- The start time of a recorded child process (see the SQLite migration).
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS pid_start_ms bigint;
ALTER TABLE workflow_step_runs ADD COLUMN IF NOT EXISTS pid_start_ms bigint;
