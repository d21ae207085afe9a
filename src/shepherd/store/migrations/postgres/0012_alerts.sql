-- Operator alerts, stored: a row is written in the same transaction that moves
-- its task into `error` (a supervisor's escalation, a crash verdict that
-- quarantines it, or its owner failing it into `error`), so an alert outlives
-- the process that raised it. `reason` and `failure_count` are what the alert
-- sinks are sent. An operator acknowledges an alert once (acknowledged_at,
-- acknowledged_by); until then it is open.
CREATE TABLE alerts (
    id              bigserial PRIMARY KEY,
    task_id         text NOT NULL,
    workflow        text NOT NULL,
    key             text,
    reason          text NOT NULL,
    failure_count   integer NOT NULL,
    raised_at       timestamptz NOT NULL,
    acknowledged_at timestamptz,
    acknowledged_by text
);
CREATE INDEX alerts_open ON alerts (id) WHERE acknowledged_at IS NULL;
