-- A running task's claim is moved ahead at every step's start and reply (a
-- touch: `complete_by` only). A touch writes no indexed column, so no index of
-- `tasks` is written by it. The index on `complete_by` goes: the supervisor's
-- scan for expired claims walks `tasks_locked_by` (the running tasks) instead.
-- `updated_at` (indexed by `tasks_ended`, `tasks_errors`) is moved by changes
-- of state and claim, never by a touch.
DROP INDEX tasks_owned;
