-- Additive (issue 31, `loops apply`): the scope of the file that manages a
-- loop, by default the file's canonical path. NULL on every row written
-- before: a loop made by hand.
ALTER TABLE loops ADD COLUMN IF NOT EXISTS scope TEXT;
-- The loops of one scope, read by every apply of it.
CREATE INDEX IF NOT EXISTS idx_loops_scope ON loops(scope) WHERE scope IS NOT NULL;
