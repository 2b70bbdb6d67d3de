{{/* The completion routine (sql/complete.sql): its parameters, and the
ids and tokens completed, and whether each was a flow's parent. */}}{{define "signature"}}(bigint[], uuid[], jsonb[])
RETURNS TABLE (id bigint, token text, parent boolean){{end}}
