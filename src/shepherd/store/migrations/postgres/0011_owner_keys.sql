-- Exclusive owners: at most one process owns a key of an exclusive agent at any
-- moment, through a lease with an epoch. Taking a key that is free (never
-- leased, released, or its lease expired) bumps the epoch; renewing one's own
-- live lease keeps it. A write that carries an older epoch, or comes after the
-- lease ended, is a stale owner's and is refused. `state` is the owner's small
-- durable JSON state, read by the next owner when it takes the key over.
CREATE TABLE owner_keys (
    agent       text NOT NULL,
    key         text NOT NULL,
    owner       text,
    epoch       bigint NOT NULL,
    lease_until timestamptz NOT NULL,
    state       text,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (agent, key)
);
CREATE INDEX owner_keys_owner ON owner_keys (owner);
