-- Reminders of exclusive owners (`app.remind`): a named timer on one key of an
-- exclusive agent, fired by the leading supervisor as a call to the key's
-- owner. `next_at` is its next tick (advanced in the transaction that queues
-- the tick's call), `every` its period (NULL: once, then deleted), and
-- `generation` is bumped by every replace, so that a tick's call id (a hash
-- of agent, key, name, generation and tick: unique in `calls`) is never
-- queued twice. `within` and `attempts` are the calls' window and handlings.
CREATE TABLE reminders (
    agent      text NOT NULL,
    key        text NOT NULL,
    name       text NOT NULL,
    payload    text NOT NULL,
    next_at    timestamptz NOT NULL,
    every      double precision,
    generation integer NOT NULL,
    within     double precision NOT NULL,
    attempts   integer NOT NULL,
    created_at timestamptz NOT NULL,
    fired_at   timestamptz,
    PRIMARY KEY (agent, key, name)
);
CREATE INDEX reminders_due ON reminders (next_at);
-- A reminder's call says which reminder it is (its handler's `request.reminder`)
-- and the tick it stands for; NULL for any other call.
ALTER TABLE calls ADD COLUMN reminder text;
ALTER TABLE calls ADD COLUMN reminder_at timestamptz;
