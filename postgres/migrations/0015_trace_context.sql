-- Schema version 15: each live job's creation context, the W3C Trace
-- Context of the span that enqueued it (docs/design/tracing.md): the
-- traceparent and tracestate its enqueue was given or made, which a claim
-- returns so that the attempt's process span continues the trace. NULL
-- for a job enqueued outside any trace, as every job enqueued before this
-- version. Nullable columns without a default: adding them rewrites
-- nothing and holds the table's lock only for the catalog change. IF NOT
-- EXISTS: a test that rolls the schema back by hand may leave them.
ALTER TABLE readpast_jobs
    ADD COLUMN IF NOT EXISTS traceparent text,
    ADD COLUMN IF NOT EXISTS tracestate text;
