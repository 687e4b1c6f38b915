-- Additive (issue 27): `loops cost` also totals the runs whose agent
-- reported its tokens but no cost (codex, codewith), which
-- `idx_runs_cost` does not hold; this index gives them in the same way,
-- so the report reads the runs that reported something, not all runs.
CREATE INDEX IF NOT EXISTS idx_runs_usage ON loop_runs(finished_at)
  WHERE usage IS NOT NULL;
