-- Agents that face real services: a circuit breaker per remote service, shared by
-- every process; its state changes; "this key was done" marks for side effects
-- that must run at most once; and, per request, its step window (for heartbeats)
-- and a per-call retry policy.
CREATE TABLE breakers (
    service              text PRIMARY KEY,
    state                text NOT NULL,
    consecutive_failures integer NOT NULL DEFAULT 0,
    window_started_at    timestamptz,
    window_calls         integer NOT NULL DEFAULT 0,
    window_failures      integer NOT NULL DEFAULT 0,
    opened_at            timestamptz,
    probe_started_at     timestamptz,
    version              bigint NOT NULL DEFAULT 0,
    updated_at           timestamptz NOT NULL
);

CREATE TABLE breaker_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    service    text NOT NULL,
    from_state text NOT NULL,
    to_state   text NOT NULL,
    detail     text NOT NULL,
    at         timestamptz NOT NULL
);
CREATE INDEX breaker_events_service ON breaker_events (service, id);

CREATE TABLE done_keys (
    key        text PRIMARY KEY,
    state      text NOT NULL,
    holder     text NOT NULL,
    result     text,
    created_at timestamptz NOT NULL,
    done_at    timestamptz
);

ALTER TABLE requests ADD COLUMN within double precision;
ALTER TABLE requests ADD COLUMN retry text;
