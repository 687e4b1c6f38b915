-- How many independent steps of a workflow run at once (see the SQLite migration).
ALTER TABLE workflow_specs ADD COLUMN IF NOT EXISTS max_parallel bigint;
