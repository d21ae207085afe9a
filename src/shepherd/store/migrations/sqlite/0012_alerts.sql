-- Operator alerts, stored: a row is written in the same transaction that moves
-- its task into `error` (a supervisor's escalation, a crash verdict that
-- quarantines it, or its owner failing it into `error`), so an alert outlives
-- the process that raised it. `reason` and `failure_count` are what the alert
-- sinks are sent. An operator acknowledges an alert once (acknowledged_at,
-- acknowledged_by); until then it is open.
CREATE TABLE alerts (
    id              INTEGER PRIMARY KEY,
    task_id         TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    key             TEXT,
    reason          TEXT NOT NULL,
    failure_count   INTEGER NOT NULL,
    raised_at       REAL NOT NULL,
    acknowledged_at REAL,
    acknowledged_by TEXT
);
CREATE INDEX alerts_open ON alerts (id) WHERE acknowledged_at IS NULL;
