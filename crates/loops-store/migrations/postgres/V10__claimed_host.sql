-- The host a run was claimed on (issue 25; see the SQLite migration): a run
-- whose runner id names no host (`manual-tick:<pid>`) but which this host
-- claimed is judged by this host's liveness probe, not after another host's
-- grace. NULL on runs claimed before this migration, which are judged as
-- before. Older binaries ignore the column, so the minimum compatible
-- version stays: their re-claims leave an earlier claim's host behind, which
-- is why a host named by the runner id (`host:pid:suffix`) wins over it.
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS claimed_host TEXT;
