-- A running task's claim is moved ahead at every step's start and reply (a
-- touch: `complete_by` only). A touch writes no indexed column, so PostgreSQL
-- can make it a HOT update: the row's new version goes on the same page and
-- none of the table's indexes is written. The index on `complete_by` goes: the
-- supervisor's scan for expired claims walks `tasks_locked_by` (the running
-- tasks) instead. `updated_at` (indexed by `tasks_ended`, `tasks_errors`) is
-- moved by changes of state and claim, never by a touch. New pages of `tasks`
-- keep room for those versions.
DROP INDEX tasks_owned;
ALTER TABLE tasks SET (fillfactor = 70);
