-- A call to an exclusive agent (`exclusive_by`) carries its owning key: only
-- the key's owner (owner_keys) takes it, in the order the key's calls were sent.
ALTER TABLE calls ADD COLUMN owner_key TEXT;
CREATE INDEX calls_of_key ON calls (agent, owner_key, id) WHERE answered_at IS NULL;
