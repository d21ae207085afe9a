-- Resource governance: resources (what agents call that is constrained), the
-- logical partitions that live on them, and the entities assigned to each
-- partition (a lookup table, so one entity or a whole partition can move).
-- info is a JSON object of connection details; capacity and rate are optional
-- limits. store_versions numbers the mapping: every write that changes it bumps
-- the 'resolver' row in its transaction, so each process knows when its cached
-- resolutions are stale.
CREATE TABLE resources (
    name       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    info       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(info) AND json_type(info) = 'object'),
    capacity   INTEGER CHECK (capacity > 0),
    rate       REAL CHECK (rate > 0),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE partitions (
    name       TEXT PRIMARY KEY,
    resource   TEXT NOT NULL REFERENCES resources (name),
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX partitions_resource ON partitions (resource);
CREATE TABLE entity_partitions (
    entity     TEXT PRIMARY KEY,
    partition  TEXT NOT NULL REFERENCES partitions (name),
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX entity_partitions_partition ON entity_partitions (partition);
CREATE TABLE store_versions (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO store_versions (name, version) VALUES ('resolver', 0);
