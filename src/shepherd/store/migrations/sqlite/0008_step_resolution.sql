-- Where a step's entity lived when the step was first sent: its resolution
-- (entity, partition, resource with its details) as JSON, on the step and on its
-- request, so the agent receives it and a retried or recovered step is sent to
-- the same resource (replay is deterministic). NULL for a call naming no entity.
ALTER TABLE steps ADD COLUMN resolution text;
ALTER TABLE requests ADD COLUMN resolution text;
