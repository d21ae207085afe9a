-- Rate: each resource with a rate has one token bucket, shared by every
-- process: its tokens as of `at` (the store's clock). A taker locks the
-- resource's row first, so takes take turns; the decision is
-- shepherd.core.rates.take. A resource's removal drops its bucket.
CREATE TABLE resource_tokens (
    resource text PRIMARY KEY REFERENCES resources (name) ON DELETE CASCADE,
    tokens   double precision NOT NULL,
    at       timestamptz NOT NULL
);
