-- Many hosts on one database (issue 15).
--
-- Each claim carries a token; heartbeats and finalizes are fenced on it, so
-- a run another daemon took over can no longer be written by its old owner.
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS claim_token TEXT;
-- Copied from the loop's overlap policy when a run is claimed: the database
-- itself refuses a second running run of a loop whose overlap is `skip`.
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS exclusive boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX IF NOT EXISTS loop_runs_one_running ON loop_runs(loop_id)
  WHERE status = 'running' AND exclusive;
-- Runs whose lease may have expired, for the recovery sweep.
CREATE INDEX IF NOT EXISTS idx_runs_running_lease ON loop_runs(lease_expires_at)
  WHERE status = 'running';

-- Every live daemon, one row each; replaces the single daemon_lease, which
-- stays for the original's sake.
CREATE TABLE IF NOT EXISTS daemons (
  id TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  pid bigint NOT NULL,
  version TEXT NOT NULL,
  started_at timestamptz NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  -- The daemon's host clock minus the database's, as it last measured it.
  clock_skew_ms bigint
);

-- The oldest binary schema version that may still use this database: an
-- older binary refuses it with a clear message instead of writing to it.
CREATE TABLE IF NOT EXISTS schema_compat (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  min_compatible_version bigint NOT NULL
);
INSERT INTO schema_compat (id, min_compatible_version) VALUES (true, 7)
  ON CONFLICT (id) DO UPDATE SET min_compatible_version = GREATEST(schema_compat.min_compatible_version, 7);
