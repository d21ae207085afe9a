-- Operators: named tokens. Only the SHA-256 of a token is kept (token_hash,
-- looked up by its index); the token itself is shown once to whoever made it.
-- last_used_at is when it last opened a session (to the minute).
CREATE TABLE operators (
    name         text PRIMARY KEY,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    token_hash   text NOT NULL
);
CREATE UNIQUE INDEX operators_token ON operators (token_hash);
-- The task list: newest first by (created_at, id), every filter through an
-- index that yields that order, so a page (and one 50 pages deep, found by a
-- keyset cursor) reads about one page of rows. By state: tasks_state (now
-- ending in id, the order's tie-break). By workflow, with or without states:
-- tasks_workflow_state, one ordered range per state, merged. No filter, or a
-- time range alone: tasks_created. A key: tasks_key. An id prefix: the
-- primary key's range. Throughput: tasks_ended (0005) and tasks_errors give
-- the tasks that ended in the last hour by when they ended.
DROP INDEX tasks_state;
CREATE INDEX tasks_state ON tasks (process_state, created_at, id);
CREATE INDEX tasks_created ON tasks (created_at, id);
CREATE INDEX tasks_workflow_state ON tasks (workflow, process_state, created_at, id);
CREATE INDEX tasks_key ON tasks (key) WHERE key IS NOT NULL;
CREATE INDEX tasks_errors ON tasks (updated_at) WHERE process_state = 'error';
