-- Additive: the token of the claim that owns a running run (issue 15). A
-- heartbeat or a finalize that carries a token must match it, so a run
-- taken over by another claim can no longer be written by the old one, even
-- when both claims came from the same daemon. NULL on rows the original
-- wrote and on runs claimed before this migration; a NULL token fences on
-- `claimed_by` alone, as before.
ALTER TABLE loop_runs ADD COLUMN claim_token TEXT;
