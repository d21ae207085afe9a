-- Where a durable call's entity lived when the call was sent (`app.call(...,
-- entity=...)`): its resolution (entity, partition, resource with its details)
-- as JSON, so that every handling of the call, in any process, holds a slot of
-- and takes tokens of the same resource, and its handler sees
-- `request.resolution`. NULL for a call naming no entity.
ALTER TABLE calls ADD COLUMN resolution text;
