-- Additive (issue 17): a loop's failure and success hooks, shell commands a
-- runner starts after a run is finally recorded, and whether their stdin
-- carries the run's output unredacted. NULL and 0 on rows the original
-- wrote, which therefore run no hook; the original ignores the columns.
ALTER TABLE loops ADD COLUMN on_failure TEXT;
ALTER TABLE loops ADD COLUMN on_success TEXT;
ALTER TABLE loops ADD COLUMN hook_show_output INTEGER NOT NULL DEFAULT 0;
