-- Signals (`app.signal`, `ctx.wait_for`): a named JSON payload sent to one task,
-- kept until a wait of that name consumes it. `id` gives the order sent (ids are
-- taken while the task's row is held, so two signals of one task are numbered in
-- commit order); `consumed_seq` is the seq of the wait step that consumed it
-- (NULL while it waits in the inbox). An idempotency key names at most one signal
-- per task (NULL keys never clash).
CREATE TABLE signals (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id         text NOT NULL,
    name            text NOT NULL,
    payload         text NOT NULL,
    idempotency_key text,
    sent_by         text,
    sent_at         timestamptz NOT NULL,
    consumed_seq    integer,
    consumed_at     timestamptz,
    UNIQUE (task_id, idempotency_key)
);
CREATE INDEX signals_inbox ON signals (task_id, name, id);
