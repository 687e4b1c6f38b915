-- Indexes so the cost of listing runs and of finding the next loop expiry
-- does not grow with what is stored (see the SQLite migration).
CREATE INDEX IF NOT EXISTS idx_runs_created ON loop_runs(created_at);
CREATE INDEX IF NOT EXISTS idx_loops_status_expires ON loops(status, expires_at)
  WHERE expires_at IS NOT NULL;
