-- Exclusive owners: at most one process owns a key of an exclusive agent at any
-- moment, through a lease with an epoch. Taking a key that is free (never
-- leased, released, or its lease expired) bumps the epoch; renewing one's own
-- live lease keeps it. A write that carries an older epoch, or comes after the
-- lease ended, is a stale owner's and is refused. `state` is the owner's small
-- durable JSON state, read by the next owner when it takes the key over.
CREATE TABLE owner_keys (
    agent       TEXT NOT NULL,
    key         TEXT NOT NULL,
    owner       TEXT,
    epoch       INTEGER NOT NULL,
    lease_until REAL NOT NULL,
    state       TEXT,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (agent, key)
);
CREATE INDEX owner_keys_owner ON owner_keys (owner);
