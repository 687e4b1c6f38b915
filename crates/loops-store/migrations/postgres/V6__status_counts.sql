-- Counts of loops and runs by status, kept by triggers (see the SQLite
-- migration). Concurrent writers of one status serialize on its counter row
-- only for the length of their own transaction.
CREATE TABLE IF NOT EXISTS status_counts (
  tbl TEXT NOT NULL,
  status TEXT NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (tbl, status)
);

DELETE FROM status_counts;
INSERT INTO status_counts (tbl, status, n)
  SELECT 'loops', status, COUNT(*) FROM loops GROUP BY status;
INSERT INTO status_counts (tbl, status, n)
  SELECT 'loop_runs', status, COUNT(*) FROM loop_runs GROUP BY status;

CREATE OR REPLACE FUNCTION loops_status_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE status_counts SET n = n - 1 WHERE tbl = TG_TABLE_NAME AND status = OLD.status;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO status_counts (tbl, status, n) VALUES (TG_TABLE_NAME, NEW.status, 1)
      ON CONFLICT (tbl, status) DO UPDATE SET n = status_counts.n + 1;
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS status_counts_loops_insert ON loops;
CREATE TRIGGER status_counts_loops_insert AFTER INSERT OR DELETE ON loops
  FOR EACH ROW EXECUTE FUNCTION loops_status_counts();
DROP TRIGGER IF EXISTS status_counts_loops_update ON loops;
CREATE TRIGGER status_counts_loops_update AFTER UPDATE OF status ON loops
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION loops_status_counts();
DROP TRIGGER IF EXISTS status_counts_runs_insert ON loop_runs;
CREATE TRIGGER status_counts_runs_insert AFTER INSERT OR DELETE ON loop_runs
  FOR EACH ROW EXECUTE FUNCTION loops_status_counts();
DROP TRIGGER IF EXISTS status_counts_runs_update ON loop_runs;
CREATE TRIGGER status_counts_runs_update AFTER UPDATE OF status ON loop_runs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION loops_status_counts();

CREATE INDEX IF NOT EXISTS idx_runs_status_created ON loop_runs(status, created_at);
