-- sql/complete.sql as a function (see postgres/routines.go): each server
-- session plans the completion once, with plans that cannot scan a whole
-- table. Its result is the statement's: the ids and tokens completed.
CREATE OR REPLACE FUNCTION {{.Name}}(bigint[], uuid[], jsonb[])
RETURNS TABLE (id bigint, token text)
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
