-- A step's request to an exclusive agent (`exclusive_by`) carries its owning key:
-- only the key's owner (owner_keys) takes it, in the order the key's requests
-- were queued; agent workers never take it.
ALTER TABLE requests ADD COLUMN owner_key TEXT;
CREATE INDEX requests_of_key ON requests (agent, owner_key, id) WHERE owner_key IS NOT NULL;
