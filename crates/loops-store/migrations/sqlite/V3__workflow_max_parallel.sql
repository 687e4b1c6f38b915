-- Additive: how many independent steps of a workflow run at once (new in
-- loops). NULL on rows the original wrote, and on workflows created without
-- `maxParallel`; NULL means 1, the original's serial order (SPEC §6.3).
ALTER TABLE workflow_specs ADD COLUMN max_parallel INTEGER;
