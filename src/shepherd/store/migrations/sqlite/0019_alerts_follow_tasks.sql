-- Alerts follow their task. An alert is open, acknowledged by an operator, or
-- resolved when its task later ends in any state but `error` (resolved_at,
-- resolved_by: what resolved it). A task has at most one open alert
-- (alerts_open_task): a failure while it is open raises it again
-- (times_raised, last_raised_at, the latest reason and failure count).
-- resolution_sent_at: when the supervisor's leader told the alert sinks of the
-- resolution (NULL: not yet). tasks.alerted: set when an alert of the task is
-- stored, read by the write that ends the task, which then resolves it.
ALTER TABLE alerts ADD COLUMN state TEXT NOT NULL DEFAULT 'open';
ALTER TABLE alerts ADD COLUMN times_raised INTEGER NOT NULL DEFAULT 1;
ALTER TABLE alerts ADD COLUMN last_raised_at REAL;
ALTER TABLE alerts ADD COLUMN resolved_at REAL;
ALTER TABLE alerts ADD COLUMN resolved_by TEXT;
ALTER TABLE alerts ADD COLUMN resolution_sent_at REAL;
ALTER TABLE tasks ADD COLUMN alerted INTEGER NOT NULL DEFAULT 0;
UPDATE alerts SET state = 'acknowledged' WHERE acknowledged_at IS NOT NULL;
-- The alerts of tasks that ended well already resolve, when their task ended.
UPDATE alerts SET state = 'resolved',
    resolved_at = (SELECT t.updated_at FROM tasks t WHERE t.id = alerts.task_id),
    resolved_by = 'task ' || (SELECT t.process_state FROM tasks t WHERE t.id = alerts.task_id)
WHERE task_id IN (SELECT id FROM tasks WHERE process_state IN ('processed', 'compensated', 'cancelled'));
-- Those of tasks deleted by retention (which deletes only tasks that ended) too.
UPDATE alerts SET state = 'resolved', resolved_at = (julianday('now') - 2440587.5) * 86400.0,
    resolved_by = 'task ended (deleted by retention since)'
WHERE state <> 'resolved' AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = alerts.task_id);
-- A task's several open alerts become its newest one, raised as many times.
UPDATE alerts SET
    times_raised = (SELECT count(*) FROM alerts o WHERE o.task_id = alerts.task_id AND o.state = 'open'),
    last_raised_at = raised_at,
    raised_at = (SELECT min(o.raised_at) FROM alerts o WHERE o.task_id = alerts.task_id AND o.state = 'open')
WHERE state = 'open'
    AND EXISTS (SELECT 1 FROM alerts o WHERE o.task_id = alerts.task_id AND o.state = 'open' AND o.id < alerts.id)
    AND NOT EXISTS (SELECT 1 FROM alerts o WHERE o.task_id = alerts.task_id AND o.state = 'open' AND o.id > alerts.id);
UPDATE alerts SET state = 'resolved', resolved_at = raised_at,
    resolved_by = 'merged into alert ' || (SELECT max(o.id) FROM alerts o WHERE o.task_id = alerts.task_id AND o.state = 'open'),
    resolution_sent_at = raised_at
WHERE state = 'open'
    AND EXISTS (SELECT 1 FROM alerts o WHERE o.task_id = alerts.task_id AND o.state = 'open' AND o.id > alerts.id);
UPDATE tasks SET alerted = 1 WHERE id IN (SELECT task_id FROM alerts WHERE state <> 'resolved');
DROP INDEX alerts_open;
CREATE UNIQUE INDEX alerts_open_task ON alerts (task_id) WHERE state = 'open';
-- The alert list by state, newest first, and its counts.
CREATE INDEX alerts_state ON alerts (state, id);
-- The resolutions the sinks were not told yet.
CREATE INDEX alerts_unsent ON alerts (id) WHERE state = 'resolved' AND resolution_sent_at IS NULL;
