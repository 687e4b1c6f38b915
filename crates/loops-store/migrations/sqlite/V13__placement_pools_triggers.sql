-- Additive (issue 30, docs/triggers.md): where a loop runs, the pools that
-- bound how many runs go at once, and triggers other than the clock. NULL
-- on every row written before and on every row the original writes, which
-- is today's behaviour: any runner, no pool, the clock only.

-- A loop's placement: a JSON array of labels a runner must all carry
-- (P3), and the pool it belongs to (Q2).
ALTER TABLE loops ADD COLUMN runs_on TEXT;
ALTER TABLE loops ADD COLUMN pool TEXT;
-- Its upstream edges, a JSON array of {"loop", "on"} (T1); 1 when it runs
-- on triggers only, with no schedule of its own.
ALTER TABLE loops ADD COLUMN after_json TEXT;
ALTER TABLE loops ADD COLUMN trigger_only INTEGER NOT NULL DEFAULT 0;

-- A run counts against the pool its loop had when it was claimed (Q2),
-- and names the trigger that started it, if any (T5).
ALTER TABLE loop_runs ADD COLUMN pool TEXT;
ALTER TABLE loop_runs ADD COLUMN trigger_id TEXT;
-- The pool's running runs, counted in every claim of a member (Q3).
CREATE INDEX IF NOT EXISTS idx_runs_pool_running ON loop_runs(pool)
  WHERE status = 'running' AND pool IS NOT NULL;

-- The labels of the daemon holding the lease (P2), a JSON array.
ALTER TABLE daemon_lease ADD COLUMN labels TEXT;

-- Q1: a pool and its limit.
CREATE TABLE IF NOT EXISTS pools (
  name TEXT PRIMARY KEY,
  max_running INTEGER NOT NULL CHECK (max_running >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- T3–T5: a trigger is a slot of its own; `run_id` is set by the claim
-- that starts it, and `coalesced_at` when catch-up `latest` folds it into
-- a newer one (T7).
CREATE TABLE IF NOT EXISTS loop_triggers (
  id TEXT PRIMARY KEY,
  loop_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  source_run_id TEXT,
  source_loop_id TEXT,
  idempotency_key TEXT,
  payload TEXT,
  created_at TEXT NOT NULL,
  run_id TEXT,
  coalesced_at TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS loop_triggers_source
  ON loop_triggers(loop_id, source_run_id) WHERE source_run_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS loop_triggers_key
  ON loop_triggers(loop_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS loop_triggers_pending
  ON loop_triggers(loop_id, created_at) WHERE run_id IS NULL AND coalesced_at IS NULL;
-- What started a run, for `runs` (T10).
CREATE INDEX IF NOT EXISTS loop_triggers_run ON loop_triggers(run_id)
  WHERE run_id IS NOT NULL;
-- The loops that run after others, read by every finalize (T3): a few
-- rows, whatever the number of loops.
CREATE INDEX IF NOT EXISTS idx_loops_after ON loops(id) WHERE after_json IS NOT NULL;
