{{/* The claim routine (sql/claim.sql): its parameters, and the claimed
jobs in claim order. */}}{{define "signature"}}(text[], text, bigint, bigint, uuid)
RETURNS TABLE (
    id bigint, queue text, kind text, payload jsonb, priority integer, state text,
    attempt integer, max_attempts integer, run_at timestamptz, group_key text,
    token text, lease_expires_at timestamptz, worker text, created_at timestamptz,
    started_at timestamptz, finished_at timestamptz, errors jsonb, result jsonb,
    unique_key text, unique_until timestamptz, tags text, snoozes integer){{end}}
