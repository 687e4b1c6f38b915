-- Additive (issue 31, `loops apply`): the scope of the file that manages a
-- loop, by default the file's canonical path. NULL on every row written
-- before and on every row the original writes: a loop made by hand.
ALTER TABLE loops ADD COLUMN scope TEXT;
-- The loops of one scope, read by every apply of it.
CREATE INDEX IF NOT EXISTS idx_loops_scope ON loops(scope) WHERE scope IS NOT NULL;
