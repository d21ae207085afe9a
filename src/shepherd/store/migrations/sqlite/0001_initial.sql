-- shepherd state store, SQLite. Instants are unix seconds (REAL), payloads JSON text.
CREATE TABLE tasks (
    id               TEXT PRIMARY KEY,
    workflow         TEXT NOT NULL,
    key              TEXT,
    input            TEXT NOT NULL,
    result           TEXT,
    error            TEXT,
    process_state    TEXT NOT NULL,
    locked_by        TEXT,
    lock_epoch       INTEGER NOT NULL DEFAULT 0,
    complete_by      REAL,
    complete_within  REAL NOT NULL,
    failure_count    INTEGER NOT NULL DEFAULT 0,
    not_before       REAL NOT NULL,
    reply_to         TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL
);
CREATE UNIQUE INDEX tasks_workflow_key ON tasks (workflow, key) WHERE key IS NOT NULL;
CREATE INDEX tasks_claimable ON tasks (not_before)
    WHERE locked_by IS NULL AND process_state IN ('pending', 'compensating');
CREATE INDEX tasks_owned ON tasks (complete_by) WHERE locked_by IS NOT NULL;
CREATE INDEX tasks_state ON tasks (process_state, created_at);

CREATE TABLE steps (
    task_id          TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    kind             TEXT NOT NULL,
    agent            TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    complete_by      REAL,
    request          TEXT,
    payload_override TEXT,
    result           TEXT,
    error            TEXT,
    undo             TEXT,
    compensates      INTEGER,
    started_at       REAL,
    finished_at      REAL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;

CREATE TABLE requests (
    id          INTEGER PRIMARY KEY,
    agent       TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    lock_epoch  INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    complete_by REAL NOT NULL,
    visible_at  REAL NOT NULL,
    taken_by    TEXT,
    created_at  REAL NOT NULL
);
CREATE INDEX requests_visible ON requests (agent, visible_at);
CREATE INDEX requests_task ON requests (task_id, seq);

CREATE TABLE replies (
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    lock_epoch  INTEGER NOT NULL,
    ok          INTEGER NOT NULL,
    body        TEXT NOT NULL,
    created_at  REAL NOT NULL
);
CREATE INDEX replies_task ON replies (task_id);

CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    task_id  TEXT NOT NULL,
    key      TEXT,
    reply_to TEXT,
    kind     TEXT NOT NULL,
    detail   TEXT NOT NULL,
    at       REAL NOT NULL
);
CREATE INDEX events_task ON events (task_id, id);
CREATE INDEX events_reply_to ON events (reply_to, id) WHERE reply_to IS NOT NULL;

CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
