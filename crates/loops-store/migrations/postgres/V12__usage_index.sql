-- The runs that reported a token usage, for `loops cost` (issue 27; see
-- the SQLite migration). Additive: older binaries ignore it, so the
-- minimum compatible version stays.
CREATE INDEX IF NOT EXISTS idx_runs_usage ON loop_runs(finished_at)
  WHERE usage IS NOT NULL;
