-- A routine (see postgres/routines.go): a hot-path statement as a function
-- of its own, so that each server session plans it once, with plans that
-- cannot scan a whole table and are never compiled by the JIT. Its result
-- is the statement's. The parameters and result columns ("signature")
-- come from the routine's own file, which may also replace the body (by
-- default RETURN QUERY of the statement), declare variables and add
-- settings ("settings").
CREATE OR REPLACE FUNCTION {{.Name}}{{template "signature"}}
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off{{block "settings" .}}{{end}}
AS $routine$
#variable_conflict use_column
{{block "declare" .}}{{end}}BEGIN
{{block "body" .}}RETURN QUERY
{{.Body}};{{end}}
END
$routine$
