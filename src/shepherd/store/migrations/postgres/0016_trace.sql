-- Tracing (OpenTelemetry): the trace context that travels with a task. Each is
-- the propagator's fields as a JSON object (W3C traceparent and tracestate), or
-- NULL when tracing is off: tasks.trace is the submitter's span, a request's
-- the span of the scheduler's task run that sent it, a reply's the agent's step
-- span that answered it.
ALTER TABLE tasks ADD COLUMN trace text;
ALTER TABLE requests ADD COLUMN trace text;
ALTER TABLE replies ADD COLUMN trace text;
