-- shepherd state store, PostgreSQL. The same tables and columns as SQLite's 0001,
-- in native types: instants are timestamptz, durations float8 seconds.
-- Payloads are JSON text exactly as shepherd.payloads wrote it (validated the same
-- way on both backends), so every value reads back as it was written.
CREATE TABLE tasks (
    id               text PRIMARY KEY,
    workflow         text NOT NULL,
    key              text,
    input            text NOT NULL,
    result           text,
    error            text,
    process_state    text NOT NULL,
    locked_by        text,
    lock_epoch       bigint NOT NULL DEFAULT 0,
    complete_by      timestamptz,
    complete_within  double precision NOT NULL,
    failure_count    integer NOT NULL DEFAULT 0,
    not_before       timestamptz NOT NULL,
    reply_to         text,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX tasks_workflow_key ON tasks (workflow, key) WHERE key IS NOT NULL;
CREATE INDEX tasks_claimable ON tasks (not_before)
    WHERE locked_by IS NULL AND process_state IN ('pending', 'compensating');
CREATE INDEX tasks_owned ON tasks (complete_by) WHERE locked_by IS NOT NULL;
CREATE INDEX tasks_state ON tasks (process_state, created_at);

CREATE TABLE steps (
    task_id          text NOT NULL,
    seq              integer NOT NULL,
    kind             text NOT NULL,
    agent            text NOT NULL,
    state            text NOT NULL,
    attempt          integer NOT NULL DEFAULT 0,
    complete_by      timestamptz,
    request          text,
    payload_override text,
    result           text,
    error            text,
    undo             text,
    compensates      integer,
    started_at       timestamptz,
    finished_at      timestamptz,
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE requests (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent       text NOT NULL,
    task_id     text NOT NULL,
    seq         integer NOT NULL,
    attempt     integer NOT NULL,
    lock_epoch  bigint NOT NULL,
    kind        text NOT NULL,
    payload     text NOT NULL,
    complete_by timestamptz NOT NULL,
    visible_at  timestamptz NOT NULL,
    taken_by    text,
    created_at  timestamptz NOT NULL
);
CREATE INDEX requests_visible ON requests (agent, visible_at);
CREATE INDEX requests_task ON requests (task_id, seq);

CREATE TABLE replies (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     text NOT NULL,
    seq         integer NOT NULL,
    attempt     integer NOT NULL,
    lock_epoch  bigint NOT NULL,
    ok          boolean NOT NULL,
    body        text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX replies_task ON replies (task_id);

CREATE TABLE events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id  text NOT NULL,
    key      text,
    reply_to text,
    kind     text NOT NULL,
    detail   text NOT NULL,
    at       timestamptz NOT NULL
);
CREATE INDEX events_task ON events (task_id, id);
CREATE INDEX events_reply_to ON events (reply_to, id) WHERE reply_to IS NOT NULL;

CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    epoch      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);
