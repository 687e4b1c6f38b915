-- Additive (issue 25): the host a run was claimed on, written by every
-- claim beside `claimed_by`, whose format stays the original's: the runner
-- ids of `tick` and `run-now` (`manual-tick:<pid>`, `manual:<pid>`) name no
-- host. NULL on rows claimed before this migration and on rows the original
-- wrote, which the original ignores.
ALTER TABLE loop_runs ADD COLUMN claimed_host TEXT;
