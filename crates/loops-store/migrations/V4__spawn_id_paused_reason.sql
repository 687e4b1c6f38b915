-- Additive: the spawn cookie (`LOOPS_SPAWN_ID`) of a recorded child process,
-- so the recovery of a dead daemon's run also finds the processes that left
-- the run's process group. NULL on rows the original wrote.
ALTER TABLE loop_runs ADD COLUMN spawn_id TEXT;
ALTER TABLE workflow_step_runs ADD COLUMN spawn_id TEXT;
-- Additive: why loops paused a loop by itself (a stored schedule that can no
-- longer be planned). NULL for loops paused by a user, and on rows the
-- original wrote; the original ignores the column.
ALTER TABLE loops ADD COLUMN paused_reason TEXT;
