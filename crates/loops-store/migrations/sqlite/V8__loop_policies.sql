-- Additive: a loop's operating policies (issue 17). NULL, or 0 for the
-- counts, on rows the original wrote, which is every policy off: 0.3.1's
-- behaviour. The original neither reads nor writes these columns.
-- `labels` and `skip_exit_codes` are JSON arrays (NULL when empty);
-- `backoff` is NULL for fixed; the counts are the successes and the final
-- failures in a row, kept by every advance.
ALTER TABLE loops ADD COLUMN labels TEXT;
ALTER TABLE loops ADD COLUMN expires_after_runs INTEGER;
ALTER TABLE loops ADD COLUMN consecutive_successes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE loops ADD COLUMN pause_after_failures INTEGER;
ALTER TABLE loops ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE loops ADD COLUMN backoff TEXT;
ALTER TABLE loops ADD COLUMN max_retry_delay_ms INTEGER;
ALTER TABLE loops ADD COLUMN skip_exit_codes TEXT;
