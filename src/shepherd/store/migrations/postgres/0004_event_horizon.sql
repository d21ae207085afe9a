-- Events carry the id of the transaction that wrote them. Readers deliver events
-- in (xid, id) order and only below the oldest transaction still in flight (see
-- read_events), so a cursor never skips an event and no writer needs a
-- cluster-wide lock on the event log.
ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX events_xid ON events (xid, id);
CREATE INDEX events_reply_to_xid ON events (reply_to, xid, id) WHERE reply_to IS NOT NULL;
