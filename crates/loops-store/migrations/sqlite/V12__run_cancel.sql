-- Additive (issue 28): `loops cancel`. A cancel request is written on the
-- running run's row, where the runner holding it, on any host, sees it:
-- when it was asked (`cancel_requested_at`), by whom (`cancelled_by`,
-- `user@host` or `mcp`), and the grace between SIGTERM and SIGKILL it asks
-- for (`cancel_grace_ms`). The run is then recorded with the new status
-- `cancelled`. NULL on every row written before, and on every row the
-- original writes.
ALTER TABLE loop_runs ADD COLUMN cancel_requested_at TEXT;
ALTER TABLE loop_runs ADD COLUMN cancelled_by TEXT;
ALTER TABLE loop_runs ADD COLUMN cancel_grace_ms INTEGER;
