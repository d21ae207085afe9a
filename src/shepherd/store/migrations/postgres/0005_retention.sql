-- Retention. Ended tasks are found by age through a partial index that holds
-- only them, so a purge never scans the live ones (and writes to live tasks do
-- not maintain it). A purged task with a business key leaves a tombstone: a
-- submit of its (workflow, key) returns the purged task's id until the
-- tombstone is purged in turn. A task's done keys (`task_id/...`) are found by
-- a byte-order range, whatever the database's collation.
CREATE INDEX tasks_ended ON tasks (updated_at)
    WHERE process_state IN ('processed', 'compensated', 'cancelled');
CREATE TABLE tombstones (
    task_id       text PRIMARY KEY,
    workflow      text NOT NULL,
    key           text NOT NULL,
    process_state text NOT NULL,
    ended_at      timestamptz NOT NULL,
    purged_at     timestamptz NOT NULL
);
CREATE UNIQUE INDEX tombstones_workflow_key ON tombstones (workflow, key);
CREATE INDEX tombstones_purged ON tombstones (purged_at);
CREATE INDEX done_keys_bytes ON done_keys (key COLLATE "C");
