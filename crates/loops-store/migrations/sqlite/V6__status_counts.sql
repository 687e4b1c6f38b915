-- Additive: counts of loops and runs by status, kept by triggers, so
-- `daemon status`, `list`'s total and `doctor` read a handful of rows
-- instead of counting every run (issue 14). Triggers, not the program,
-- keep them: they fire on the original's writes as on ours, so a file the
-- original goes on writing stays counted. (Neither program uses
-- `INSERT OR REPLACE` on these tables, whose implicit deletes would not
-- fire a trigger.) `doctor` compares them with a real count and recounts
-- when they differ.
CREATE TABLE IF NOT EXISTS status_counts (
  tbl TEXT NOT NULL,
  status TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (tbl, status)
) WITHOUT ROWID;

DELETE FROM status_counts;
INSERT INTO status_counts (tbl, status, n)
  SELECT 'loops', status, COUNT(*) FROM loops GROUP BY status;
INSERT INTO status_counts (tbl, status, n)
  SELECT 'loop_runs', status, COUNT(*) FROM loop_runs GROUP BY status;

CREATE TRIGGER IF NOT EXISTS status_counts_loops_insert AFTER INSERT ON loops
BEGIN
  INSERT INTO status_counts (tbl, status, n) VALUES ('loops', NEW.status, 1)
    ON CONFLICT (tbl, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS status_counts_loops_delete AFTER DELETE ON loops
BEGIN
  UPDATE status_counts SET n = n - 1 WHERE tbl = 'loops' AND status = OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS status_counts_loops_update AFTER UPDATE OF status ON loops
  WHEN OLD.status IS NOT NEW.status
BEGIN
  UPDATE status_counts SET n = n - 1 WHERE tbl = 'loops' AND status = OLD.status;
  INSERT INTO status_counts (tbl, status, n) VALUES ('loops', NEW.status, 1)
    ON CONFLICT (tbl, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS status_counts_runs_insert AFTER INSERT ON loop_runs
BEGIN
  INSERT INTO status_counts (tbl, status, n) VALUES ('loop_runs', NEW.status, 1)
    ON CONFLICT (tbl, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS status_counts_runs_delete AFTER DELETE ON loop_runs
BEGIN
  UPDATE status_counts SET n = n - 1 WHERE tbl = 'loop_runs' AND status = OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS status_counts_runs_update AFTER UPDATE OF status ON loop_runs
  WHEN OLD.status IS NOT NEW.status
BEGIN
  UPDATE status_counts SET n = n - 1 WHERE tbl = 'loop_runs' AND status = OLD.status;
  INSERT INTO status_counts (tbl, status, n) VALUES ('loop_runs', NEW.status, 1)
    ON CONFLICT (tbl, status) DO UPDATE SET n = n + 1;
END;

-- `loops runs --status <s>` without a loop: newest first from the index,
-- instead of sorting every run of that status.
CREATE INDEX IF NOT EXISTS idx_runs_status_created ON loop_runs(status, created_at);
