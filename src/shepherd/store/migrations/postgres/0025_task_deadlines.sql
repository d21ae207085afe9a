-- Task deadlines: the instant by which a task must have ended, or NULL for none.
-- The supervisor cancels a task still pending or processing at its deadline
-- (`core.timing`); the partial index finds those, earliest first, and holds
-- only tasks that have a deadline and have not got past that point.
ALTER TABLE tasks ADD COLUMN deadline timestamptz;
CREATE INDEX tasks_deadline ON tasks (deadline)
    WHERE deadline IS NOT NULL AND process_state IN ('pending', 'processing');
