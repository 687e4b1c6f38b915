-- Additive: indexes so the cost of listing runs and of finding the next loop
-- expiry does not grow with what is stored (issue 14). The original ignores
-- them and keeps them up to date on its own writes.
-- `loops runs` without a loop: newest first, `ORDER BY created_at DESC,
-- rowid DESC LIMIT n` reads n index entries instead of sorting every run.
CREATE INDEX IF NOT EXISTS idx_runs_created ON loop_runs(created_at);
-- The tick's expiry of active loops and the daemon's next wake-up read only
-- the loops that have an expiry, instead of every active loop.
CREATE INDEX IF NOT EXISTS idx_loops_status_expires ON loops(status, expires_at)
  WHERE expires_at IS NOT NULL;
