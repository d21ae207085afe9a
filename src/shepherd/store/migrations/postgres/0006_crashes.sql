-- Crash attribution. A task remembers the processes that died while one of its
-- steps was running in them (crashes, a JSON array of instances) and how often
-- the process owning its claim died (owner_deaths). A request of a suspect task
-- (one with crashes) is taken by an agent only when that agent runs no other
-- suspect, so a poison task cannot take healthy ones down with it twice. A
-- worker row records when its death was noticed (died_at, by a process on the
-- same host that found its pid gone) and when the supervisor attributed it
-- (reaped_at).
ALTER TABLE tasks ADD COLUMN crashes text NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN owner_deaths integer NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN suspect integer NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN died_at timestamptz;
ALTER TABLE workers ADD COLUMN reaped_at timestamptz;
CREATE INDEX tasks_locked_by ON tasks (locked_by) WHERE locked_by IS NOT NULL;
CREATE INDEX requests_taken_by ON requests (taken_by) WHERE taken_by IS NOT NULL;
