-- Signals (`app.signal`, `ctx.wait_for`): a named JSON payload sent to one task,
-- kept until a wait of that name consumes it. `id` gives the order sent (never
-- reused: AUTOINCREMENT); `consumed_seq` is the seq of the wait step that consumed
-- it (NULL while it waits in the inbox). An idempotency key names at most one
-- signal per task (NULL keys never clash).
CREATE TABLE signals (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id         TEXT NOT NULL,
    name            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    idempotency_key TEXT,
    sent_by         TEXT,
    sent_at         REAL NOT NULL,
    consumed_seq    INTEGER,
    consumed_at     REAL,
    UNIQUE (task_id, idempotency_key)
);
CREATE INDEX signals_inbox ON signals (task_id, name, id);
