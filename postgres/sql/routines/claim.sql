-- sql/claim.sql as a function (see postgres/routines.go): each server
-- session plans the claim once, with plans that cannot scan a whole table.
-- Its result is the claim statement's: the claimed jobs in claim order.
CREATE OR REPLACE FUNCTION {{.Name}}(text[], text, bigint, bigint, uuid)
RETURNS TABLE (
    id bigint, queue text, kind text, payload jsonb, priority integer, state text,
    attempt integer, max_attempts integer, run_at timestamptz, group_key text,
    token text, lease_expires_at timestamptz, worker text, created_at timestamptz,
    started_at timestamptz, finished_at timestamptz, errors jsonb, result jsonb,
    unique_key text, unique_until timestamptz, tags text, snoozes integer)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $routine$
#variable_conflict use_column
BEGIN
RETURN QUERY
{{.Body}};
END
$routine$
