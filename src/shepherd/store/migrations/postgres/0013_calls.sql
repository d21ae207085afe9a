-- Durable calls from plain code (app.call): not tasks. A call waits until an
-- agent process takes it (taken_by, attempts + 1, complete_by = now + within);
-- a handling that has not answered by then is taken again by any process
-- (visible_at), up to max_attempts handlings, after which the call gets an
-- error answer. The one answer (ok, body, answered_at) is accepted only from
-- the call's latest handling. Rows are deleted once expires_at (the caller's
-- deadline and a margin) has passed, answered or not.
CREATE TABLE calls (
    id           bigserial PRIMARY KEY,
    call_id      text NOT NULL UNIQUE,
    agent        text NOT NULL,
    payload      text NOT NULL,
    within       double precision NOT NULL,
    attempts     integer NOT NULL,
    max_attempts integer NOT NULL,
    visible_at   timestamptz NOT NULL,
    taken_by     text,
    complete_by  timestamptz,
    ok           integer,
    body         text,
    answered_at  timestamptz,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX calls_waiting ON calls (agent, visible_at) WHERE answered_at IS NULL;
CREATE INDEX calls_expiring ON calls (expires_at);
