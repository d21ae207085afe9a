-- Capacity: a resource's slots are leases. A handler holds one while it runs
-- (holder: its worker, request and attempt); at most the resource's capacity of
-- unexpired slots exist at once, because every taker first locks the resource's
-- row. A slot whose holder died expires (expires_at, store clock) and is then
-- free; a resource's removal drops its slots.
CREATE TABLE resource_slots (
    resource    text NOT NULL REFERENCES resources (name) ON DELETE CASCADE,
    holder      text NOT NULL,
    worker      text NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (resource, holder)
);
CREATE INDEX resource_slots_worker ON resource_slots (worker);
