-- `loops cancel` (issue 28; see the SQLite migration). Additive: older
-- binaries ignore these columns, so the minimum compatible version stays.
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS cancel_requested_at timestamptz;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS cancelled_by TEXT;
ALTER TABLE loop_runs ADD COLUMN IF NOT EXISTS cancel_grace_ms bigint;
