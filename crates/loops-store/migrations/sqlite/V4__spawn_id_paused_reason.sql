-- Additive: the spawn id every process of a run carries in `LOOPS_SPAWN_ID`
-- (its workflow steps' too), so the recovery of a dead daemon's run also
-- finds the processes that left the run's process group. NULL on rows the
-- original wrote.
ALTER TABLE loop_runs ADD COLUMN spawn_id TEXT;
-- Additive: why loops paused a loop by itself (a stored schedule that can no
-- longer be planned). NULL for loops paused by a user, and on rows the
-- original wrote; the original ignores the column.
ALTER TABLE loops ADD COLUMN paused_reason TEXT;
