-- A loop's failure and success hooks (issue 17; see the SQLite migration).
ALTER TABLE loops ADD COLUMN IF NOT EXISTS on_failure TEXT;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS on_success TEXT;
ALTER TABLE loops ADD COLUMN IF NOT EXISTS hook_show_output bigint NOT NULL DEFAULT 0;
