-- A partition being moved: while moving_to is set and move_until has not
-- passed, the partition drains. Its steps in flight go on on its resource,
-- steps that would start there wait, and once nothing is in flight the
-- partition goes to moving_to (`shepherd partitions move`). move_holder names
-- the one move under way (a second is refused); move_until is its lease, renewed
-- while its mover waits, so that a mover that died holds nothing for long.
ALTER TABLE partitions ADD COLUMN moving_to text REFERENCES resources (name);
ALTER TABLE partitions ADD COLUMN move_holder text;
ALTER TABLE partitions ADD COLUMN move_until timestamptz;
