-- Capacity: a resource's slots are leases. A handler holds one while it runs
-- (holder: its worker, request and attempt); at most the resource's capacity of
-- unexpired slots exist at once, because every taker counts them under the
-- write lock (BEGIN IMMEDIATE). A slot whose holder died expires (expires_at,
-- store clock) and is then free; a resource's removal drops its slots.
CREATE TABLE resource_slots (
    resource    TEXT NOT NULL REFERENCES resources (name) ON DELETE CASCADE,
    holder      TEXT NOT NULL,
    worker      TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at  REAL NOT NULL,
    PRIMARY KEY (resource, holder)
) WITHOUT ROWID;
CREATE INDEX resource_slots_worker ON resource_slots (worker);
