-- Child workflows (`ctx.run_workflow`, `ctx.start_workflow`): one row per child
-- task, linking it to the parent's step `seq` that started it (a step of kind
-- `child`). `depth` counts the parents above it (1 for a top task's child);
-- `on_parent_end` is `wait` for an awaited child (its end records the parent's
-- step and wakes the parent), else `continue` or `cancel`: what becomes of the
-- child when its parent ends first. A table of its own: the claim never reads it.
CREATE TABLE task_children (
    child_id      TEXT PRIMARY KEY,
    parent_id     TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    depth         INTEGER NOT NULL,
    on_parent_end TEXT NOT NULL
);
CREATE INDEX task_children_parent ON task_children (parent_id, seq);
