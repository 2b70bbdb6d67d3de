{{/* The completion routine (sql/complete.sql): its parameters, and the
ids and tokens completed. */}}{{define "signature"}}(bigint[], uuid[], jsonb[])
RETURNS TABLE (id bigint, token text){{end}}
