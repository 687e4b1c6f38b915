-- Additive (issue 27): what a run said and cost, and why it failed. NULL on
-- every row written before, and on every row the original writes, which
-- neither reads nor writes these columns.
-- `failure_class` and `failure_fingerprint` are the agents note's §7.1 and
-- §7.2; `cost_usd_nanos` is the cost in billionths of a US dollar, so sums
-- are exact; `usage` is JSON (`{inputTokens, outputTokens, cacheReadTokens,
-- cacheWriteTokens}`); `is_error` is 0 or 1; `last_output_at` is when the
-- running process last printed, as of its last heartbeat.
ALTER TABLE loop_runs ADD COLUMN failure_class TEXT;
ALTER TABLE loop_runs ADD COLUMN failure_fingerprint TEXT;
ALTER TABLE loop_runs ADD COLUMN session_id TEXT;
ALTER TABLE loop_runs ADD COLUMN result TEXT;
ALTER TABLE loop_runs ADD COLUMN cost_usd_nanos INTEGER;
ALTER TABLE loop_runs ADD COLUMN usage TEXT;
ALTER TABLE loop_runs ADD COLUMN is_error INTEGER;
ALTER TABLE loop_runs ADD COLUMN worktree TEXT;
ALTER TABLE loop_runs ADD COLUMN worktree_branch TEXT;
ALTER TABLE loop_runs ADD COLUMN last_output_at TEXT;
-- A loop's daily cost cap, in billionths of a US dollar (NULL: none).
ALTER TABLE loops ADD COLUMN max_cost_per_day_nanos INTEGER;
-- `loops health` and `loops cost` read only the runs that have a class, a
-- cost or a token usage (codex and codewith report tokens, no cost), so
-- their cost follows those runs, not all runs.
CREATE INDEX IF NOT EXISTS idx_runs_failure ON loop_runs(finished_at)
  WHERE failure_class IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_runs_cost ON loop_runs(finished_at)
  WHERE cost_usd_nanos IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_runs_usage ON loop_runs(finished_at)
  WHERE usage IS NOT NULL;
