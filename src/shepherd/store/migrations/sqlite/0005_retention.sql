-- Retention. Ended tasks are found by age through a partial index that holds
-- only them, so a purge never scans the live ones (and writes to live tasks do
-- not maintain it). A purged task with a business key leaves a tombstone: a
-- submit of its (workflow, key) returns the purged task's id until the
-- tombstone is purged in turn.
CREATE INDEX tasks_ended ON tasks (updated_at)
    WHERE process_state IN ('processed', 'compensated', 'cancelled');
CREATE TABLE tombstones (
    task_id       TEXT PRIMARY KEY,
    workflow      TEXT NOT NULL,
    key           TEXT NOT NULL,
    process_state TEXT NOT NULL,
    ended_at      REAL NOT NULL,
    purged_at     REAL NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX tombstones_workflow_key ON tombstones (workflow, key);
CREATE INDEX tombstones_purged ON tombstones (purged_at);
