-- Additive (issue 30, docs/triggers.md T8): the paths a loop watches and
-- the quiet time a change waits for, as a JSON object {"paths": [...],
-- "debounceMs": n}. NULL on every row written before and on every row the
-- original writes: the loop watches nothing.
ALTER TABLE loops ADD COLUMN watch_json TEXT;
-- The watch loops, read by every daemon turn: a few rows, whatever the
-- number of loops.
CREATE INDEX IF NOT EXISTS idx_loops_watch ON loops(id) WHERE watch_json IS NOT NULL;
