{{/* The completion routine (sql/complete.sql): its parameters, and the
ids and tokens completed, whether each was a flow's parent, and whether
the statement freed a key's slot. */}}{{define "signature"}}(bigint[], uuid[], jsonb[], boolean)
RETURNS TABLE (id bigint, token text, parent boolean, freed boolean){{end}}
