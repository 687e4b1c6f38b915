-- Additive: the start time of a recorded child process, so a reused pid is
-- not mistaken for the run's own process (SPEC §9 item 14). NULL on rows the
-- original wrote; liveness then falls back to the pid alone.
ALTER TABLE loop_runs ADD COLUMN pid_start_ms INTEGER;
ALTER TABLE workflow_step_runs ADD COLUMN pid_start_ms INTEGER;
