-- Counts of loops and runs by status, kept by triggers (see the SQLite
-- migration), so counting reads a few rows however many are stored.
--
-- Unlike SQLite's one row per status, each change appends a delta row
-- (+1 for the new status, -1 for the old): a counter row that every writer
-- updates would serialize the writers of every host on it, and deadlock
-- them against their loop locks. A count is the sum of its rows; the daemons
-- fold the deltas into one row per status now and then (with their
-- membership heartbeat), so the sum stays over a few rows.
CREATE TABLE IF NOT EXISTS status_counts (
  tbl TEXT NOT NULL,
  status TEXT NOT NULL,
  n bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_status_counts ON status_counts(tbl, status);

DELETE FROM status_counts;
INSERT INTO status_counts (tbl, status, n)
  SELECT 'loops', status, COUNT(*) FROM loops GROUP BY status;
INSERT INTO status_counts (tbl, status, n)
  SELECT 'loop_runs', status, COUNT(*) FROM loop_runs GROUP BY status;

CREATE OR REPLACE FUNCTION loops_status_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    INSERT INTO status_counts (tbl, status, n) VALUES (TG_TABLE_NAME, OLD.status, -1);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO status_counts (tbl, status, n) VALUES (TG_TABLE_NAME, NEW.status, 1);
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
