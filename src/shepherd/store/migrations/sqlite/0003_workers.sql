-- The worker registry: one row per process that runs roles, beaten periodically
-- (beat_at) and marked stopped on a graceful stop, so that operators and the
-- supervisor can tell live processes from dead ones. roles and agents are JSON
-- arrays of names.
CREATE TABLE workers (
    instance   TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    roles      TEXT NOT NULL,
    agents     TEXT NOT NULL,
    started_at REAL NOT NULL,
    beat_at    REAL NOT NULL,
    stopped_at REAL
) WITHOUT ROWID;
