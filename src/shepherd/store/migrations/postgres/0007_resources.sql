-- Resource governance: resources (what agents call that is constrained), the
-- logical partitions that live on them, and the entities assigned to each
-- partition (a lookup table, so one entity or a whole partition can move).
-- info is a JSON object of connection details; capacity and rate are optional
-- limits. store_versions numbers the mapping: every write that changes it bumps
-- the 'resolver' row in its transaction (and locks it first, so that writes to
-- the mapping take turns), so each process knows when its cached resolutions
-- are stale.
CREATE TABLE resources (
    name       text PRIMARY KEY,
    kind       text NOT NULL,
    info       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(info) = 'object'),
    capacity   integer CHECK (capacity > 0),
    rate       double precision CHECK (rate > 0),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE TABLE partitions (
    name       text PRIMARY KEY,
    resource   text NOT NULL REFERENCES resources (name),
    updated_at timestamptz NOT NULL
);
CREATE INDEX partitions_resource ON partitions (resource);
CREATE TABLE entity_partitions (
    entity     text PRIMARY KEY,
    partition  text NOT NULL REFERENCES partitions (name),
    updated_at timestamptz NOT NULL
);
CREATE INDEX entity_partitions_partition ON entity_partitions (partition);
CREATE TABLE store_versions (
    name    text PRIMARY KEY,
    version bigint NOT NULL
);
INSERT INTO store_versions (name, version) VALUES ('resolver', 0);
