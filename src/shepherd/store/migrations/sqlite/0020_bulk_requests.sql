-- The idempotency keys of scripted bulk requests (`Idempotency-Key`): the key,
-- what it was first used for (the action and a digest of the request) and the
-- reply it replays. The row is written in the transaction of the bulk action,
-- so a key names an action that took place, and only one.
CREATE TABLE bulk_requests (
    key        TEXT PRIMARY KEY,
    action     TEXT NOT NULL,
    digest     TEXT NOT NULL,
    reply      TEXT,
    created_at REAL NOT NULL
) WITHOUT ROWID;
