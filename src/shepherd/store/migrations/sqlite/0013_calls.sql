-- Durable calls from plain code (app.call): not tasks. A call waits until an
-- agent process takes it (taken_by, attempts + 1, complete_by = now + within);
-- a handling that has not answered by then is taken again by any process
-- (visible_at), up to max_attempts handlings, after which the call gets an
-- error answer. The one answer (ok, body, answered_at) is accepted only from
-- the call's latest handling. Rows are deleted once expires_at (the caller's
-- deadline and a margin) has passed, answered or not.
CREATE TABLE calls (
    id           INTEGER PRIMARY KEY,
    call_id      TEXT NOT NULL UNIQUE,
    agent        TEXT NOT NULL,
    payload      TEXT NOT NULL,
    within       REAL NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    visible_at   REAL NOT NULL,
    taken_by     TEXT,
    complete_by  REAL,
    ok           INTEGER,
    body         TEXT,
    answered_at  REAL,
    created_at   REAL NOT NULL,
    expires_at   REAL NOT NULL
);
CREATE INDEX calls_waiting ON calls (agent, visible_at) WHERE answered_at IS NULL;
CREATE INDEX calls_expiring ON calls (expires_at);
