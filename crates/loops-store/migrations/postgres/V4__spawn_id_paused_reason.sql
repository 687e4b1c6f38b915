-- The spawn id of a run's processes, and why loops paused a loop by itself
-- (see the SQLite migration).
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS spawn_id TEXT;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS paused_reason TEXT;
