-- The worker registry: one row per process that runs roles, beaten periodically
-- (beat_at) and marked stopped on a graceful stop, so that operators and the
-- supervisor can tell live processes from dead ones. roles and agents are JSON
-- arrays of names.
CREATE TABLE workers (
    instance   text PRIMARY KEY,
    host       text NOT NULL,
    pid        integer NOT NULL,
    roles      text NOT NULL,
    agents     text NOT NULL,
    started_at timestamptz NOT NULL,
    beat_at    timestamptz NOT NULL,
    stopped_at timestamptz
);
