{{/* The claim routine: its parameters, the claimed jobs in claim order,
and its body. When no group of the queues $1 has a due ready mark, the
claim's group branches would find nothing: it sends the ungrouped branch
alone (sql/claim_ungrouped.sql, a plan of 20 nodes instead of
sql/claim.sql's 86), and sql/claim.sql otherwise. The check reads the
marks' claim-order index (queue first) up to the first due mark. */}}{{define "signature"}}(text[], text, bigint, bigint, uuid)
RETURNS TABLE (
    id bigint, queue text, kind text, payload jsonb, priority integer,
    attempt integer, max_attempts integer, run_at timestamptz, group_key text,
    created_at timestamptz, started_at timestamptz, errors jsonb,
    unique_key text, unique_until timestamptz, tags text, snoozes integer){{end}}
{{define "body"}}IF EXISTS (SELECT 1 FROM readpast_group_ready WHERE queue = ANY ($1) AND run_at <= now()) THEN
RETURN QUERY
{{.Body}};
ELSE
RETURN QUERY
{{.Ungrouped}};
END IF;{{end}}
