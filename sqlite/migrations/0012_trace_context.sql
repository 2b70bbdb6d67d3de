-- readpast schema version 12 for SQLite: each live job's creation
-- context, the W3C Trace Context of the span that enqueued it, as on
-- PostgreSQL (postgres/migrations/0015_trace_context.sql;
-- docs/design/tracing.md). NULL for a job enqueued outside any trace, as
-- every job enqueued before this version. Adding a nullable column
-- without a default changes only the schema: no row is rewritten.
ALTER TABLE readpast_jobs ADD COLUMN traceparent TEXT;
ALTER TABLE readpast_jobs ADD COLUMN tracestate TEXT;
