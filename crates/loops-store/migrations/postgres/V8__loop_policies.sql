-- A loop's operating policies (issue 17; see the SQLite migration).
ALTER TABLE loops ADD COLUMN IF NOT EXISTS labels json;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS expires_after_runs bigint;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS consecutive_successes bigint NOT NULL DEFAULT 0;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS pause_after_failures bigint;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS consecutive_failures bigint NOT NULL DEFAULT 0;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS backoff TEXT;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS max_retry_delay_ms bigint;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS skip_exit_codes json;
