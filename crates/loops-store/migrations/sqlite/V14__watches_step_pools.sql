-- Additive (issue 30, docs/triggers.md T8): the paths a loop watches and
-- the quiet time a change waits for, as a JSON object {"paths": [...],
-- "debounceMs": n}. NULL on every row written before and on every row the
-- original writes: the loop watches nothing.
ALTER TABLE loops ADD COLUMN watch_json TEXT;
-- The watch loops, read by every daemon turn: a few rows, whatever the
-- number of loops.
CREATE INDEX IF NOT EXISTS idx_loops_watch ON loops(id) WHERE watch_json IS NOT NULL;
-- Additive (issue 30, docs/triggers.md Q2): the pool a workflow step
-- holds a place in while it runs, recorded when it starts. NULL on every
-- row written before and on every row the original writes: in no pool.
ALTER TABLE workflow_step_runs ADD COLUMN pool TEXT;
-- The running steps of a pool, counted by every claim and step start of
-- the pool: as many rows as the pool has places, whatever the history.
CREATE INDEX IF NOT EXISTS idx_step_runs_pool_running ON workflow_step_runs(pool)
  WHERE status = 'running' AND pool IS NOT NULL;
