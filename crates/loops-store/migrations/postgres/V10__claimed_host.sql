-- The host a run was claimed on (issue 25; see the SQLite migration): a run
-- claimed on this host is judged by this host's liveness probe even when its
-- runner id names no host. NULL on runs claimed before this migration, or
-- by a binary that does not write it, which are judged as before. Older
-- binaries ignore the column, so the minimum compatible version stays.
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS claimed_host TEXT;
