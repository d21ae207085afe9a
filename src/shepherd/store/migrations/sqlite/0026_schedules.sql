-- Schedules: a workflow fired on a cron expression (in a time zone) or every N
-- seconds. `since` is the instant its ticks count from: the last tick the
-- leading supervisor looked at (fired or skipped), or when the schedule was
-- created or last resumed; last_tick is the last one looked at, NULL before.
-- Each fired tick is a task whose key holds the tick's instant, so a tick
-- fired twice is one task.
CREATE TABLE schedules (
    name         TEXT PRIMARY KEY,
    workflow     TEXT NOT NULL,
    cron         TEXT,
    every        REAL,
    data         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    catch_up     TEXT NOT NULL,
    max_catch_up INTEGER NOT NULL,
    paused       INTEGER NOT NULL,
    created_at   REAL NOT NULL,
    since        REAL NOT NULL,
    last_tick    REAL
) WITHOUT ROWID;
