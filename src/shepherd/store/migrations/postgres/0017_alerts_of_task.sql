-- A task's own alerts, newest first (the dashboard's task page, `app.alerts(task_id=...)`).
CREATE INDEX alerts_task ON alerts (task_id, id);
