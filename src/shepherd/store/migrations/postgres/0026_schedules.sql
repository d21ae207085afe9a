-- Schedules: a workflow fired on a cron expression (in a time zone) or every N
-- seconds. `since` is the instant its ticks count from: the last tick the
-- leading supervisor looked at (fired or skipped), or when the schedule was
-- created or last resumed; last_tick is the last one looked at, NULL before.
-- Each fired tick is a task whose key holds the tick's instant, so a tick
-- fired twice is one task.
CREATE TABLE schedules (
    name         text PRIMARY KEY,
    workflow     text NOT NULL,
    cron         text,
    every        double precision,
    data         text NOT NULL,
    timezone     text NOT NULL,
    catch_up     text NOT NULL,
    max_catch_up integer NOT NULL,
    paused       boolean NOT NULL,
    created_at   timestamptz NOT NULL,
    since        timestamptz NOT NULL,
    last_tick    timestamptz
);
