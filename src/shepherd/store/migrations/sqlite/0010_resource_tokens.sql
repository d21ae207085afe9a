-- Rate: each resource with a rate has one token bucket, shared by every
-- process: its tokens as of `at` (the store's clock, unix seconds). Takes run
-- under the write lock, so they take turns; the decision is
-- shepherd.core.rates.take.
CREATE TABLE resource_tokens (
    resource TEXT PRIMARY KEY REFERENCES resources (name) ON DELETE CASCADE,
    tokens   REAL NOT NULL,
    at       REAL NOT NULL
) WITHOUT ROWID;
