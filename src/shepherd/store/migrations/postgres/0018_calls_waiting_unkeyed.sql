-- `calls_waiting` serves the takers of calls to agents that are not exclusive
-- (`owner_key IS NULL`): a key's calls are found through `calls_of_key`. Left
-- in this index too, each keyed call cost three more index writes (sent, taken,
-- answered) that no query read.
DROP INDEX calls_waiting;
CREATE INDEX calls_waiting ON calls (agent, visible_at) WHERE answered_at IS NULL AND owner_key IS NULL;
