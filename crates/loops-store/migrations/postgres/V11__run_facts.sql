-- What a run said and cost, and why it failed (issue 27; see the SQLite
-- migration). Additive: older binaries ignore these columns, so the
-- minimum compatible version stays.
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS failure_class TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS failure_fingerprint TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS session_id TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS result TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS cost_usd_nanos bigint;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS usage json;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS is_error bigint;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS worktree TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS worktree_branch TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS last_output_at timestamptz;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS max_cost_per_day_nanos bigint;
CREATE INDEX IF NOT EXISTS idx_runs_failure ON loop_runs(finished_at)
  WHERE failure_class IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_runs_cost ON loop_runs(finished_at)
  WHERE cost_usd_nanos IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_runs_usage ON loop_runs(finished_at)
  WHERE usage IS NOT NULL;
