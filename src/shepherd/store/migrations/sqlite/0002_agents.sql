-- Agents that face real services: a circuit breaker per remote service, shared by
-- every process; its state changes; "this key was done" marks for side effects
-- that must run at most once; and, per request, its step window (for heartbeats)
-- and a per-call retry policy.
CREATE TABLE breakers (
    service              TEXT PRIMARY KEY,
    state                TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    window_started_at    REAL,
    window_calls         INTEGER NOT NULL DEFAULT 0,
    window_failures      INTEGER NOT NULL DEFAULT 0,
    opened_at            REAL,
    probe_started_at     REAL,
    version              INTEGER NOT NULL DEFAULT 0,
    updated_at           REAL NOT NULL
);

CREATE TABLE breaker_events (
    id         INTEGER PRIMARY KEY,
    service    TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    detail     TEXT NOT NULL,
    at         REAL NOT NULL
);
CREATE INDEX breaker_events_service ON breaker_events (service, id);

CREATE TABLE done_keys (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    holder     TEXT NOT NULL,
    result     TEXT,
    created_at REAL NOT NULL,
    done_at    REAL
) WITHOUT ROWID;

ALTER TABLE requests ADD COLUMN within REAL;
ALTER TABLE requests ADD COLUMN retry TEXT;
